package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// API labels for metrics.
const (
	apiOpenAI = "openai"
	apiOllama = "ollama"
	apiMeta   = "meta" // /, /healthz, /metrics, unknown paths
)

// endpoint is one route: its pattern, API and handler.
type endpoint struct {
	method, path string
	api          string
	h            http.HandlerFunc
}

func (s *Server) endpoints() []endpoint {
	return []endpoint{
		{"POST", "/v1/chat/completions", apiOpenAI, s.handleChatCompletions},
		{"POST", "/v1/completions", apiOpenAI, s.handleCompletions},
		{"GET", "/v1/models", apiOpenAI, s.handleModels},
		{"GET", "/v1/models/{id...}", apiOpenAI, s.handleModel},
		{"POST", "/v1/embeddings", apiOpenAI, s.handleEmbeddings},
		{"POST", "/v1/responses", apiOpenAI, s.handleResponses},
		{"POST", "/api/generate", apiOllama, s.handleGenerate},
		{"POST", "/api/chat", apiOllama, s.handleChat},
		{"GET", "/api/tags", apiOllama, s.handleTags},
		{"POST", "/api/show", apiOllama, s.handleShow},
		{"GET", "/api/ps", apiOllama, s.handlePS},
		{"POST", "/api/embed", apiOllama, s.handleOllamaEmbed},
		{"POST", "/api/embeddings", apiOllama, s.handleOllamaEmbeddings},
		{"POST", "/api/pull", apiOllama, s.handlePull},
		{"GET", "/api/version", apiOllama, s.handleVersion},
		{"GET", "/{$}", apiMeta, s.serveRoot}, // GET patterns answer HEAD too; browsers get the dashboard
		{"GET", "/healthz", apiMeta, s.handleHealthz},
		{"GET", "/metrics", apiMeta, s.handleMetrics},
	}
}

// routes builds the mux. Every route is wrapped for authentication and
// metrics; paths no route knows get 404 (405 for a known path and another
// method) in the shape of the API the path belongs to.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, e := range s.endpoints() {
		mux.Handle(e.method+" "+e.path, s.wrap(e.api, e.path, e.h))
		allowed[e.path] = append(allowed[e.path], e.method)
	}
	for _, e := range s.extra {
		method, path, _ := strings.Cut(e.pattern, " ")
		mux.Handle(e.pattern, s.wrap(apiMeta, path, e.h.ServeHTTP))
		allowed[path] = append(allowed[path], method)
	}
	mux.Handle("/", s.wrap(apiMeta, "other", func(w http.ResponseWriter, r *http.Request) {
		d := dialectOf(r.URL.Path)
		if methods, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			s.writeError(w, d, &apiError{status: http.StatusMethodNotAllowed, typ: typeInvalidRequest,
				message: "method " + r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		s.writeError(w, d, &apiError{status: http.StatusNotFound, typ: typeNotFound, message: "no such endpoint: " + r.URL.Path})
	}))
	return mux
}

// dialectOf picks the error shape for a path.
func dialectOf(path string) dialect {
	if strings.HasPrefix(path, "/v1/") || path == "/v1" {
		return dialectOpenAI
	}
	return dialectOllama
}

// wrap adds the Host and Origin checks with their CORS answers (guard),
// authentication and per-request metrics to a handler. The checks run
// first, so that a refused request never reaches authentication or a
// handler that reads its body.
func (s *Server) wrap(api, path string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		rec := &statusRecorder{ResponseWriter: w}
		s.metrics.inflight.Inc()
		defer func() {
			s.metrics.inflight.Dec()
			status := rec.outcome
			if status == 0 {
				status = rec.status
			}
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(api, path, strconv.Itoa(status)).Inc()
			s.metrics.latency.WithLabelValues(api, path).Observe(s.now().Sub(start).Seconds())
		}()
		if !s.guard(rec, r) {
			return
		}
		if path != "/healthz" && !s.authorized(r) && !s.browserAuthorized(rec, r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="meshllm"`)
			s.writeError(rec, dialectOf(r.URL.Path), &apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "invalid_api_key",
				message: "missing or wrong API token: send Authorization: Bearer TOKEN (browsers: open /?token=TOKEN once)"})
			return
		}
		h(rec, r)
	})
}

// statusRecorder remembers the status a handler sent, and the outcome of a
// streamed response whose status was already 200 when it failed.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	outcome int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// setOutcome records how a request really ended, for metrics.
func setOutcome(w http.ResponseWriter, status int) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.outcome = status
	}
}

// writeJSON sends v with a status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the response failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError sends e in the shape of d's API, before anything else was
// written.
func (s *Server) writeError(w http.ResponseWriter, d dialect, e *apiError) {
	setOutcome(w, e.status)
	if e.retry && s.cfg.RetryAfter > 0 {
		secs := int((s.cfg.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if e.status >= 500 {
		s.log.Warn("request failed", "status", e.status, "err", e.message)
	}
	if d == dialectOpenAI {
		writeJSON(w, e.status, openAIErrorBody(e))
	} else {
		writeJSON(w, e.status, ollamaError{Error: e.message})
	}
}

// openAIError is OpenAI's error object.
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type openAIErrorEnvelope struct {
	Error openAIError `json:"error"`
}

func openAIErrorBody(e *apiError) openAIErrorEnvelope {
	out := openAIErrorEnvelope{Error: openAIError{Message: e.message, Type: e.typ}}
	if e.param != "" {
		out.Error.Param = &e.param
	}
	if e.code != "" {
		out.Error.Code = &e.code
	}
	return out
}

// ollamaError is Ollama's error object.
type ollamaError struct {
	Error string `json:"error"`
}

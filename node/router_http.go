package node

import (
	"encoding/json"
	"net/http"
)

// MeshStatus is the body of GET /v1/mesh.
type MeshStatus struct {
	Model string `json:"model"`
	// Local is this peer's own engine as the router sees it.
	Local LocalStatus `json:"local"`
	// Peers are the other peers serving the model, sorted by ID.
	Peers []PeerStatus `json:"peers"`
	// Recent are the latest routing decisions, oldest first (only with
	// ?recent=1).
	Recent []DecisionRecord `json:"recent,omitempty"`
}

// LocalStatus is the local engine's part of /v1/mesh.
type LocalStatus struct {
	QueueDepth       int     `json:"queue_depth"`
	Active           int     `json:"active"`
	Slots            int     `json:"slots"`
	PrefillTokPerSec float64 `json:"prefill_tok_per_sec"`
	DecodeTokPerSec  float64 `json:"decode_tok_per_sec"`
}

// Status returns what /v1/mesh reports.
func (r *Router) Status(withRecent bool) MeshStatus {
	st := r.eng.Stats()
	pf, dc := r.speeds.Get()
	s := MeshStatus{
		Model: r.info.Name,
		Local: LocalStatus{QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots, PrefillTokPerSec: pf, DecodeTokPerSec: dc},
		Peers: r.mesh.Peers(r.now()),
	}
	r.annotateTrust(s.Peers, r.now())
	if withRecent {
		s.Recent = r.Recent()
	}
	return s
}

// MeshHandler serves GET /v1/mesh: the mesh as this peer sees it, as
// JSON (MeshStatus); ?recent=1 adds the recent decisions. The caller
// mounts it (and guards it like the rest of the API).
func (r *Router) MeshHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, `{"error":"method not allowed"}`, http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(r.Status(req.URL.Query().Get("recent") == "1"))
		if err != nil {
			http.Error(w, `{"error":"internal error"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(body, '\n'))
	})
}

package infer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Ollama store layout.
const (
	// OllamaModelMediaType marks the GGUF layer of an Ollama manifest.
	OllamaModelMediaType = "application/vnd.ollama.image.model"
	// DefaultRegistry and DefaultNamespace complete short model names
	// ("qwen2.5:0.5b" is registry.ollama.ai/library/qwen2.5:0.5b).
	DefaultRegistry  = "registry.ollama.ai"
	DefaultNamespace = "library"
	// DefaultTag completes a name without a tag.
	DefaultTag = "latest"
)

// ModelRef is a model name in an Ollama store: [registry/][namespace/]name[:tag].
type ModelRef struct {
	Registry, Namespace, Name, Tag string
}

// ParseModelRef parses an Ollama model name, filling in the default
// registry, namespace and tag. Names like "qwen2.5:0.5b", "user/model" and
// "host:5000/ns/model:tag" are accepted.
func ParseModelRef(s string) (ModelRef, error) {
	r := ModelRef{Registry: DefaultRegistry, Namespace: DefaultNamespace, Tag: DefaultTag}
	if s == "" || strings.ContainsAny(s, " \\\t\n") || strings.Contains(s, "..") {
		return r, fmt.Errorf("%w: invalid model name %q", ErrUnknownModel, s)
	}
	parts := strings.Split(s, "/")
	last := parts[len(parts)-1]
	if i := strings.LastIndexByte(last, ':'); i >= 0 {
		last, r.Tag = last[:i], last[i+1:]
	}
	switch len(parts) {
	case 1:
	case 2:
		r.Namespace = parts[0]
	case 3:
		r.Registry, r.Namespace = parts[0], parts[1]
	default:
		return r, fmt.Errorf("%w: invalid model name %q (want [host/][namespace/]name[:tag])", ErrUnknownModel, s)
	}
	r.Name = last
	for _, p := range []string{r.Registry, r.Namespace, r.Name, r.Tag} {
		if p == "" || p == "." {
			return r, fmt.Errorf("%w: invalid model name %q", ErrUnknownModel, s)
		}
	}
	return r, nil
}

// String is the shortest name that parses back to r: default registry,
// namespace and tag are left out.
func (r ModelRef) String() string {
	s := r.Name
	if r.Tag != DefaultTag {
		s += ":" + r.Tag
	}
	switch {
	case r.Registry != DefaultRegistry:
		return r.Registry + "/" + r.Namespace + "/" + s
	case r.Namespace != DefaultNamespace:
		return r.Namespace + "/" + s
	}
	return s
}

// Store is an Ollama model store: Dir holds manifests/ and blobs/.
// A Store is a plain value; its methods only read the file system.
type Store struct {
	Dir string
}

// DefaultStore is the store Ollama itself uses: $OLLAMA_MODELS, or
// ~/.ollama/models.
func DefaultStore() Store {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return Store{Dir: d}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Store{Dir: filepath.Join(".ollama", "models")}
	}
	return Store{Dir: filepath.Join(home, ".ollama", "models")}
}

// StoreModel is one model of a store.
type StoreModel struct {
	Name       string    `json:"name"`   // short name ("qwen2.5:0.5b")
	Path       string    `json:"path"`   // the GGUF blob
	Digest     string    `json:"digest"` // "sha256:<hex>" of the blob
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"` // the manifest's
}

type ollamaManifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"layers"`
}

// Lookup finds the GGUF blob of a model name in the store.
func (s Store) Lookup(name string) (StoreModel, error) {
	ref, err := ParseModelRef(name)
	if err != nil {
		return StoreModel{}, s.unknown(name, err)
	}
	mpath := filepath.Join(s.Dir, "manifests", ref.Registry, ref.Namespace, ref.Name, ref.Tag)
	m, err := s.readManifest(mpath, ref)
	if err != nil {
		return StoreModel{}, s.unknown(name, err)
	}
	return m, nil
}

func (s Store) readManifest(mpath string, ref ModelRef) (StoreModel, error) {
	b, err := os.ReadFile(mpath)
	if err != nil {
		return StoreModel{}, err
	}
	var man ollamaManifest
	if err := json.Unmarshal(b, &man); err != nil {
		return StoreModel{}, fmt.Errorf("manifest %s: %w", mpath, err)
	}
	for _, l := range man.Layers {
		if l.MediaType != OllamaModelMediaType {
			continue
		}
		hexd, ok := strings.CutPrefix(l.Digest, "sha256:")
		if !ok || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
			return StoreModel{}, fmt.Errorf("manifest %s: bad digest %q", mpath, l.Digest)
		}
		blob := filepath.Join(s.Dir, "blobs", "sha256-"+hexd)
		fi, err := os.Stat(blob)
		if err != nil {
			return StoreModel{}, fmt.Errorf("manifest %s: model blob missing: %w", mpath, err)
		}
		var mod time.Time
		if mi, err := os.Stat(mpath); err == nil {
			mod = mi.ModTime()
		}
		return StoreModel{Name: ref.String(), Path: blob, Digest: l.Digest, Size: fi.Size(), ModifiedAt: mod}, nil
	}
	return StoreModel{}, fmt.Errorf("manifest %s has no %s layer", mpath, OllamaModelMediaType)
}

func (s Store) unknown(name string, cause error) error {
	return fmt.Errorf("%w %q: pass --model PATH or the name of a model in your Ollama store (looked in %s): %v",
		ErrUnknownModel, name, s.Dir, cause)
}

// List returns the store's models sorted by name. A store that does not
// exist is empty; manifests that cannot be read are skipped.
func (s Store) List() ([]StoreModel, error) {
	root := filepath.Join(s.Dir, "manifests")
	var out []StoreModel
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 {
			return nil
		}
		ref := ModelRef{Registry: parts[0], Namespace: parts[1], Name: parts[2], Tag: parts[3]}
		if m, err := s.readManifest(p, ref); err == nil {
			out = append(out, m)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// ListStore lists the models of DefaultStore.
func ListStore() ([]StoreModel, error) { return DefaultStore().List() }

// ResolvedModel is a model reference resolved to a GGUF file.
type ResolvedModel struct {
	Name  string // how clients address it: the store name, or the file's base name without .gguf
	Path  string // the GGUF file
	Store bool   // found in an Ollama store
}

// ResolveModel resolves ref to a GGUF file: an existing file path, or else a
// model name in store. A ref that can only be a path (it ends in .gguf, or
// starts with /, ./, ../ or ~/) is not looked up in the store. Errors wrap
// ErrUnknownModel and say how to fix the reference.
func ResolveModel(ref string, store Store) (ResolvedModel, error) {
	if ref == "" {
		return ResolvedModel{}, fmt.Errorf("%w: no model given: pass --model PATH or the name of a model in your Ollama store (looked in %s)", ErrUnknownModel, store.Dir)
	}
	path := ref
	if rest, ok := strings.CutPrefix(ref, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, rest)
		}
	}
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() {
		return ResolvedModel{Name: strings.TrimSuffix(filepath.Base(path), ".gguf"), Path: path}, nil
	}
	if looksLikePath(ref) {
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", path)
		}
		return ResolvedModel{}, fmt.Errorf("%w %q: %v: pass --model PATH or the name of a model in your Ollama store (looked in %s)",
			ErrUnknownModel, ref, err, store.Dir)
	}
	m, err := store.Lookup(ref)
	if err != nil {
		return ResolvedModel{}, err
	}
	return ResolvedModel{Name: m.Name, Path: m.Path, Store: true}, nil
}

func looksLikePath(ref string) bool {
	for _, p := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return strings.HasSuffix(strings.ToLower(ref), ".gguf") || filepath.IsAbs(ref)
}

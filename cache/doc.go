// Package cache holds what a meshllm peer knows about KV caches: its own,
// exactly, and its peers', approximately.
//
// # Local cache: Tree
//
// Tree is the exact radix tree of the local engine's KV cache. The engine has
// a fixed number of slots (llama.cpp sequence ids); each holds one token
// sequence, and Tree is exactly the union of those sequences with a reference
// count per node, so Tree.Size is the number of distinct KV cells in use. The
// engine updates it as it prefills (Set), decodes (Append), rolls back
// (Truncate) and evicts (Clear); it asks Match for the slot with the longest
// cached prefix of a prompt and Victims which slots to evict (least recently
// used first, never a locked one) when it needs room.
//
// # Peers' caches: digests, replicas and the cluster view
//
// A peer advertises its cache as a Digest: the set of block-hash chains it
// holds. A token sequence is cut into blocks of B tokens; the hash of block i
// chains the hash of block i-1 and is seeded by the model's identity and B
// (Hasher), so equal hashes mean equal prefixes of the same model; in a
// private mesh they are keyed too (NewKeyedHasher), so that only the
// mesh's members can compute them for a guessed prompt. A Source
// derives the digest from the Tree and emits snapshots and deltas stamped
// with (epoch, seq); Digest.MarshalBinary and Decode give them a compact,
// versioned, size-bounded binary form.
// A Replica applies them, ignoring stale and duplicate ones and asking for a
// snapshot after a gap or a new epoch; ClusterView indexes every peer's
// replica by chain hash so that one walk of a prompt's chain estimates the
// match on all peers at once. docs/digests.md has the measured figures.
//
// # Concurrency
//
// Nothing in this package is safe for concurrent use and nothing in it starts
// a goroutine or reads a clock: each value is owned by one goroutine (the
// engine's loop owns the Tree, the router's loop owns the ClusterView), and
// time is always passed in by the caller as "now", in nanoseconds of the
// caller's clock. Values of different peers in one process are independent:
// the package has no global state.
package cache

//go:build !unix

package p2p

// systemFDs returns 0: the limit is unknown here, so libp2p's base
// descriptor limit applies.
func systemFDs() int { return 0 }

// Package layout holds the import-rule test of the repository's layout
// (DESIGN.md, "Layout"): which package may import what. It has no code of
// its own; `go test ./testnet/layout` runs the rules.
package layout

// Package faults runs real `meshllm join` processes and injects faults into
// them: SIGKILL mid-stream, SIGSTOP stalls, a dead bootstrap peer, restarts
// with the same identity, and network partitions between containers. A
// client Driver sends a steady stream of requests through a surviving peer
// meanwhile and checks that every answer arrives complete.
//
// The helpers (Peer, Driver, the API readers) hold no testing.T, so the
// soak program (testnet/soak) uses them too; the fault cases themselves are
// this package's tests. They exec bin/meshllm, built by `make build`, and
// skip when it is missing.
package faults

package p2p

import (
	"strings"
	"testing"
	"time"

	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

func TestPresets(t *testing.T) {
	d := DefaultConfig()
	if !d.EnableMDNS || !d.EnablePortMapping || !d.EnableAutoNAT || !d.EnableHolePunching || !d.EnableRelayClient {
		t.Error("the desktop preset must have LAN discovery and NAT traversal on")
	}
	var tcp, quic bool
	for _, a := range d.ListenAddrs {
		tcp = tcp || a == "/ip4/0.0.0.0/tcp/4002"
		quic = quic || a == "/ip4/0.0.0.0/udp/4002/quic-v1"
	}
	if !tcp || !quic {
		t.Errorf("desktop listen addresses %v lack TCP or QUIC on 0.0.0.0:4002", d.ListenAddrs)
	}
	l := LoopbackConfig()
	if l.EnableMDNS || l.EnablePortMapping || l.DHTMode != DHTServer {
		t.Error("the loopback preset must stay on the machine and serve the DHT")
	}
	for _, a := range l.ListenAddrs {
		if !strings.HasPrefix(a, "/ip4/127.0.0.1/") {
			t.Errorf("loopback preset listens on %s", a)
		}
	}
}

// TestResourceLimitsForADesktop pins the limits docs/operations-p2p.md
// quotes for the default 256 MiB.
func TestResourceLimitsForADesktop(t *testing.T) {
	r := DefaultConfig().Resources
	r.MaxFD = 1000
	sys := resourceLimits(&r).ToPartialLimitConfig().System
	for name, c := range map[string]struct{ got, want int64 }{
		"memory":        {int64(sys.Memory), 256 << 20},
		"conns":         {int64(sys.Conns), 160},
		"conns inbound": {int64(sys.ConnsInbound), 80},
		"streams":       {int64(sys.Streams), 2560},
		"fd":            {int64(sys.FD), 1000},
	} {
		if c.got != c.want {
			t.Errorf("system %s limit %d, want %d", name, c.got, c.want)
		}
	}
	r.MaxConns, r.MaxConnsInbound, r.MaxStreams = 50, 20, 300
	sys = resourceLimits(&r).ToPartialLimitConfig().System
	if sys.Conns != 50 || sys.ConnsInbound != 20 || sys.Streams != 300 {
		t.Errorf("explicit caps not applied: %+v", sys)
	}
	if sys.FD == rcmgr.BlockAllLimit || sys.FD < 256 {
		t.Errorf("descriptor limit %v", sys.FD)
	}
}

func TestParseBootstrapPeersGroupsByPeer(t *testing.T) {
	const id = "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
	infos, err := ParseBootstrapPeers([]string{
		"/ip4/10.0.0.1/tcp/4002/p2p/" + id,
		" /ip4/10.0.0.1/udp/4002/quic-v1/p2p/" + id + " ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || len(infos[0].Addrs) != 2 || infos[0].ID.String() != id {
		t.Fatalf("got %v", infos)
	}
}

func FuzzParseBootstrapPeers(f *testing.F) {
	f.Add("/ip4/10.0.0.1/tcp/4002/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf")
	f.Add("/dns4/boot.example/udp/4002/quic-v1/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf")
	f.Add("/ip4/1.2.3.4/tcp/1")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		infos, err := ParseBootstrapPeers([]string{s})
		if err != nil {
			return
		}
		if len(infos) != 1 || infos[0].ID == "" {
			t.Fatalf("%q parsed to %v", s, infos)
		}
	})
}

func TestValidateCollectsEveryError(t *testing.T) {
	c := DefaultConfig()
	c.ListenAddrs = nil
	c.DialTimeout = 0
	c.RTT.MinWindow = -time.Second
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"listen", "DialTimeout", "MinWindow"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

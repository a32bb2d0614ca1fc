package llama

import (
	"log/slog"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// llama.cpp logs through slog's default level; keep test output readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

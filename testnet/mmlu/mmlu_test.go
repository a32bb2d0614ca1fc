package mmlu

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadAndFiveShot(t *testing.T) {
	set, err := Load(filepath.Join("..", "..", DefaultDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Subjects) != 57 {
		t.Fatalf("%d subjects, want 57", len(set.Subjects))
	}
	total := 0
	for _, s := range set.Subjects {
		if len(s.Dev) != 5 {
			t.Fatalf("%s: %d dev examples", s.Name, len(s.Dev))
		}
		total += len(s.Test)
	}
	if total != 14042 {
		t.Fatalf("%d test questions, want 14042", total)
	}
	s := set.Subject("anatomy")
	p0, p1 := s.FiveShot(0), s.FiveShot(1)
	if !strings.HasPrefix(p0, s.Prefix()) || !strings.HasPrefix(p1, s.Prefix()) || p0 == p1 {
		t.Fatal("5-shot prompts do not share the subject prefix")
	}
	if strings.Count(p0, "Answer:") != 6 || !strings.HasSuffix(p0, "Answer:") {
		t.Fatalf("malformed prompt:\n%s", p0)
	}
}

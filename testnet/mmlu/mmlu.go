// Package mmlu loads the MMLU benchmark (57 subjects) and builds the
// standard 5-shot prompts of the seed paper's workload: a subject header,
// the subject's five dev examples with answers, then the test question. All
// questions of a subject share that long prefix, which is what prefix caching
// and prefix-aware routing exploit.
//
// A Set is read-only after Load and safe for concurrent use.
package mmlu

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Question is one multiple-choice item.
type Question struct {
	Text    string
	Choices [4]string
	Answer  int // index of the right choice
}

// Subject is one of MMLU's 57 subjects.
type Subject struct {
	Name string     // e.g. "abstract_algebra"
	Dev  []Question // the 5 few-shot examples
	Test []Question
}

// Set is the loaded benchmark, subjects sorted by name.
type Set struct {
	Subjects []*Subject
}

// DefaultDir is where the shared data lives relative to the repository root.
const DefaultDir = "../shared/data/mmlu"

// Load reads dir/dev/<subject>_dev.csv and dir/test/<subject>_test.csv.
func Load(dir string) (*Set, error) {
	devs, err := filepath.Glob(filepath.Join(dir, "dev", "*_dev.csv"))
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("mmlu: no dev/*_dev.csv under %s", dir)
	}
	slices.Sort(devs)
	set := &Set{}
	for _, dev := range devs {
		name := strings.TrimSuffix(filepath.Base(dev), "_dev.csv")
		s := &Subject{Name: name}
		if s.Dev, err = readCSV(dev); err != nil {
			return nil, err
		}
		if s.Test, err = readCSV(filepath.Join(dir, "test", name+"_test.csv")); err != nil {
			return nil, err
		}
		set.Subjects = append(set.Subjects, s)
	}
	return set, nil
}

// Subject returns the subject of that name, or nil.
func (s *Set) Subject(name string) *Subject {
	for _, sub := range s.Subjects {
		if sub.Name == name {
			return sub
		}
	}
	return nil
}

func readCSV(path string) ([]Question, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 6
	var qs []Question
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return qs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("mmlu: %s: %w", path, err)
		}
		if first && rec[0] == "question" {
			continue
		}
		ans, err := strconv.Atoi(rec[5])
		if err != nil || ans < 0 || ans > 3 {
			return nil, fmt.Errorf("mmlu: %s: bad answer %q", path, rec[5])
		}
		qs = append(qs, Question{Text: rec[0], Choices: [4]string{rec[1], rec[2], rec[3], rec[4]}, Answer: ans})
	}
}

// Header is the first line of a subject's prompt.
func (s *Subject) Header() string {
	return fmt.Sprintf("The following are multiple choice questions (with answers) about %s.\n\n",
		strings.ReplaceAll(s.Name, "_", " "))
}

// Prefix is the part shared by every 5-shot prompt of the subject: the
// header and the five answered dev examples.
func (s *Subject) Prefix() string {
	var b strings.Builder
	b.WriteString(s.Header())
	for _, q := range s.Dev {
		writeQuestion(&b, q)
		fmt.Fprintf(&b, " %c\n\n", 'A'+q.Answer)
	}
	return b.String()
}

// FiveShot is the standard 5-shot prompt of test question i, ending in
// "Answer:".
func (s *Subject) FiveShot(i int) string {
	var b strings.Builder
	b.WriteString(s.Prefix())
	writeQuestion(&b, s.Test[i%len(s.Test)])
	return b.String()
}

func writeQuestion(b *strings.Builder, q Question) {
	b.WriteString(q.Text)
	for i, c := range q.Choices {
		fmt.Fprintf(b, "\n%c. %s", 'A'+i, c)
	}
	b.WriteString("\nAnswer:")
}

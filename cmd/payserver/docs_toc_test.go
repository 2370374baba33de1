package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var updateTOC = flag.Bool("update-toc", false, "rewrite docs/OPERATIONS.md's table of contents from its headings")

const (
	tocStart = "<!-- contents: generated from the headings; go test ./cmd/payserver -run TestOperationsTableOfContents -update-toc rewrites it -->"
	tocEnd   = "<!-- /contents -->"
)

// TestOperationsTableOfContents: docs/OPERATIONS.md opens with a table of
// contents of all its sections, one line per section with its subsections,
// generated from the headings, so that it cannot drift from them.
func TestOperationsTableOfContents(t *testing.T) {
	const path = "../../docs/OPERATIONS.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := tocStart + "\n" + operationsTOC(doc) + tocEnd
	i, j := strings.Index(doc, tocStart), strings.Index(doc, tocEnd)
	if *updateTOC {
		if i < 0 || j < i {
			first := strings.Index(doc, "\n") + 1 // after the title
			doc = doc[:first] + "\n" + want + "\n" + doc[first:]
		} else {
			doc = doc[:i] + want + doc[j+len(tocEnd):]
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if i < 0 || j < i {
		t.Fatalf("OPERATIONS.md has no table of contents; run with -update-toc")
	}
	if got := doc[i : j+len(tocEnd)]; got != want {
		t.Errorf("OPERATIONS.md's table of contents is not its headings'; run with -update-toc.\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// operationsTOC lists every "## " section as a link, followed by its "### "
// subsections, as GitHub anchors them; headings inside code blocks are not
// headings.
func operationsTOC(doc string) string {
	var b strings.Builder
	seen := map[string]int{}
	inFence, subs := false, 0
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || strings.HasPrefix(line, "<!--") {
			continue
		}
		level := 0
		switch {
		case strings.HasPrefix(line, "## "):
			level = 2
		case strings.HasPrefix(line, "### "):
			level = 3
		default:
			continue
		}
		title := strings.TrimSpace(line[level+1:])
		link := "[" + strings.ReplaceAll(title, "`", "") + "](#" + anchor(title, seen) + ")"
		if level == 2 {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString("- **" + link + "**")
			subs = 0
			continue
		}
		if subs == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(" · ")
		}
		b.WriteString(link)
		subs++
	}
	return b.String() + "\n"
}

// anchor is GitHub's anchor of a heading: lower case, spaces to hyphens,
// other punctuation dropped, "-1", "-2", … after a repeat.
func anchor(title string, seen map[string]int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	a := b.String()
	n := seen[a]
	seen[a] = n + 1
	if n > 0 {
		a += "-" + strconv.Itoa(n)
	}
	return a
}

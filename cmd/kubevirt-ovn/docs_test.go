package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The project's Markdown files are its documentation: a reader follows
// their relative links and types the kubevirt-ovn flags they name. These
// tests fail on a link to a file or heading that does not exist, and on a
// kubevirt-ovn flag the binary does not have.

// repoRoot is the checkout this package is in.
const repoRoot = "../.."

// markdownFiles are the Markdown files of the checkout, relative to
// repoRoot, without what git ignores by convention here (bin/, hidden
// folders).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

// mdLine is a line of a Markdown file outside or inside a code fence.
type mdLine struct {
	n      int
	text   string
	fenced bool
}

func readMarkdown(t *testing.T, rel string) []mdLine {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, rel))
	require.NoError(t, err)
	defer f.Close()
	var out []mdLine
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		out = append(out, mdLine{n, line, fenced})
	}
	require.NoError(t, sc.Err())
	return out
}

var headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// anchors are the anchors GitHub gives the headings of lines: lower case,
// every character but letters, digits, spaces, '-' and '_' dropped,
// spaces made '-', a repeated one suffixed -1, -2, ...
func anchors(lines []mdLine) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines {
		m := headingRE.FindStringSubmatch(l.text)
		if l.fenced || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			seen[a]++
			a = a + "-" + strconv.Itoa(k)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinks: every relative link of every Markdown file names a
// file or folder of the checkout, and a #fragment a heading of its file.
func TestMarkdownLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := cache[rel]; ok {
			return a
		}
		a := anchors(readMarkdown(t, rel))
		cache[rel] = a
		return a
	}
	for _, file := range markdownFiles(t) {
		for _, l := range readMarkdown(t, file) {
			if l.fenced {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(stripCode(l.text), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s:%d: link %s: no file %s", file, l.n, target, dest)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", file, l.n, target, dest, frag)
				}
			}
		}
	}
}

// stripCode is line without its code spans (a link's syntax in one is
// text).
func stripCode(line string) string {
	parts := strings.Split(line, "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 0 {
			b.WriteString(p)
		}
	}
	return b.String()
}

// binaryFlags are the long flags of every kubevirt-ovn command.
func binaryFlags() map[string]bool {
	out := map[string]bool{"help": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	return out
}

var (
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	flagRE     = regexp.MustCompile(`(?:^|\s|\[|\()--([a-z][a-z0-9_-]*)`)
)

// docFlags are the flags a documentation line names as kubevirt-ovn's:
// those of a code span or a fenced line that starts with kubevirt-ovn,
// and a code span that is a flag alone (--name, --name=VALUE, --name
// VALUE).
func docFlags(l mdLine) []string {
	var spans []string
	if l.fenced {
		if s := strings.TrimSpace(l.text); strings.HasPrefix(s, "kubevirt-ovn ") {
			spans = append(spans, s)
		}
	} else {
		for _, m := range codeSpanRE.FindAllStringSubmatch(l.text, -1) {
			if s := m[1]; strings.HasPrefix(s, "kubevirt-ovn ") || strings.HasPrefix(s, "--") {
				spans = append(spans, s)
			}
		}
	}
	var out []string
	for _, s := range spans {
		if strings.HasPrefix(s, "--") {
			s, _, _ = strings.Cut(s, " ")
		}
		s, _, _ = strings.Cut(s, "#") // a comment
		for _, m := range flagRE.FindAllStringSubmatch(s, -1) {
			name, _, _ := strings.Cut(m[1], "=")
			out = append(out, strings.ReplaceAll(name, "_", "-"))
		}
	}
	return out
}

// otherTools are the flags of other programs the documentation names in
// a code span of their own: they are not kubevirt-ovn's.
var otherTools = []string{
	"portrange",    // ovn-nbctl lr-nat-add
	"wait",         // ovn-nbctl
	"enable-dummy", // ovs-vswitchd
	"library-path", // ld.so
	"set",          // helm
}

// TestMarkdownFlags: a flag the documentation names as kubevirt-ovn's is
// one of the binary's.
func TestMarkdownFlags(t *testing.T) {
	flags := binaryFlags()
	for _, file := range markdownFiles(t) {
		for _, l := range readMarkdown(t, file) {
			for _, f := range docFlags(l) {
				if !flags[f] && !slices.Contains(otherTools, f) {
					t.Errorf("%s:%d: --%s is no flag of kubevirt-ovn", file, l.n, f)
				}
			}
		}
	}
}

// TestMarkdownNamesNoDeveloperPath: the documentation names no path of a
// developer's machine (a home, /root, a workspace): a reader has none.
func TestMarkdownNamesNoDeveloperPath(t *testing.T) {
	for _, file := range markdownFiles(t) {
		for _, l := range readMarkdown(t, file) {
			if m := developerPathRE.FindString(l.text); m != "" {
				t.Errorf("%s:%d: names %s, a path of a developer's machine", file, l.n, m)
			}
		}
	}
}

var developerPathRE = regexp.MustCompile("(^|[\\s(`\"'])(/home/|/root/|/work/|/Users/)[^\\s)`\"']*")

// TestDocChecksCatch: the checks see a dead link, a missing heading and a
// flag the binary does not have.
func TestDocChecksCatch(t *testing.T) {
	lines := []mdLine{{1, "# Top heading", false}, {2, "## Top heading", false}, {3, "### A `code` heading (x)", false}}
	a := anchors(lines)
	assert.True(t, a["top-heading"])
	assert.True(t, a["top-heading-1"])
	assert.True(t, a["a-code-heading-x"])
	assert.Equal(t, []string{"nb", "no-such-flag"}, docFlags(mdLine{1, "run `kubevirt-ovn sync --nb unix:x --no-such-flag`", false}))
	assert.Equal(t, []string{"zone"}, docFlags(mdLine{1, "`--zone NAME=NB,SB` and `ovn-nbctl --wait=hv sync`", false}))
	assert.False(t, binaryFlags()["no-such-flag"])
	assert.True(t, binaryFlags()["from-file"])
	assert.Equal(t, "see ", stripCode("see `[x](y)`"))
	assert.Equal(t, "(/work/shared/x.md", developerPathRE.FindString("as in (/work/shared/x.md) says"))
	assert.Empty(t, developerPathRE.FindString("unix:/proc/PID/root/run/ovn/ovnnb_db.sock and /tmp/x"))
}

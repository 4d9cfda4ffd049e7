package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cobra executes a usage, help or version template with text/template,
// whose method calls by name make the linker keep every exported method of
// the program: setting one took the binary from 49 MB to 77 MB and the
// RSS of every sync with it. Usage is a Go function (flagGroups.install),
// --version a flag of the root's.
func TestNoCobraTemplates(t *testing.T) {
	templated := regexp.MustCompile(`\.Set(Usage|Help|Version)Template\(|\bVersion:\s`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Empty(t, templated.FindAllString(string(src), -1), "%s sets a cobra template", f)
	}
}

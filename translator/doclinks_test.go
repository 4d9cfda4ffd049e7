package translator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkgRef is a comment's mention of another package's identifier, such as
// nb.Commit: the package's name and the identifier.
var pkgRef = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)\b`)

// Comments name functions and types of this module's packages; when one
// moves or is renamed, a comment naming it in its old place misleads the
// reader. Every pkg.Identifier in a comment, where pkg is one of this
// module's package names, must be declared at the top level of a package
// of that name.
func TestCommentsNameIdentifiersThatExist(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root is the parent of translator/")

	type file struct {
		path string
		ast  *ast.File
	}
	var files []file
	decls := map[string]map[string]bool{} // package name -> top-level names
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "nbmodel") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files = append(files, file{path, f})
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		if decls[pkg] == nil {
			decls[pkg] = map[string]bool{}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decls[pkg][d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decls[pkg][s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decls[pkg][n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, decls, "nb", "the walk found this module's packages")

	var stale []string
	for _, f := range files {
		for _, cg := range f.ast.Comments {
			for _, m := range pkgRef.FindAllStringSubmatch(cg.Text(), -1) {
				names, ours := decls[m[1]]
				if !ours || m[1] == "main" || names[m[2]] {
					continue
				}
				rel, _ := filepath.Rel(root, f.path)
				stale = append(stale, rel+": "+m[0])
			}
		}
	}
	slices.Sort(stale)
	assert.Empty(t, slices.Compact(stale), "comments naming identifiers their package does not declare")
}

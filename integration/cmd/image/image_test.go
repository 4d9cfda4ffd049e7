package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTar returns the regular files of a tar by name, and the headers of
// every entry.
func readTar(t *testing.T, b []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.NotContains(t, headers, h.Name, "entry %s twice", h.Name)
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = body
		}
	}
	return files, headers
}

// `make image` writes an archive an engine can load: its manifest names a
// config and a layer whose digests match, the config runs /kubevirt-ovn as
// a non-root user, and the binary in the layer is static and runs.
func TestImageArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bin", "kubevirt-ovn-image.tar")
	start := time.Now()
	require.NoError(t, Build(context.Background(), Options{Out: out, Dir: filepath.Join("..", "..", "..")}))
	t.Logf("image built in %s", time.Since(start).Round(100*time.Millisecond))
	archive, err := os.ReadFile(out)
	require.NoError(t, err)
	files, _ := readTar(t, archive)

	// docker-archive: manifest.json → config and layer.
	var manifest []DockerManifest
	require.NoError(t, json.Unmarshal(files["manifest.json"], &manifest))
	require.Len(t, manifest, 1)
	assert.Equal(t, []string{"kubevirt-ovn:latest"}, manifest[0].RepoTags, "the tag deploy/deployment.yaml uses")
	require.Len(t, manifest[0].Layers, 1)
	cfgJSON, ok := files[manifest[0].Config]
	require.True(t, ok, "config %s is in the archive", manifest[0].Config)
	assert.Equal(t, manifest[0].Config, blobPath(digest(cfgJSON)), "config blob named by its digest")
	lay, ok := files[manifest[0].Layers[0]]
	require.True(t, ok, "layer %s is in the archive", manifest[0].Layers[0])

	dec := json.NewDecoder(bytes.NewReader(cfgJSON))
	dec.DisallowUnknownFields()
	var cfg Config
	require.NoError(t, dec.Decode(&cfg))
	assert.Equal(t, []string{"/kubevirt-ovn"}, cfg.Config.Entrypoint)
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	require.True(t, ok, "user %q is uid:gid", cfg.Config.User)
	for _, id := range []string{uid, gid} {
		n, err := strconv.Atoi(id)
		require.NoError(t, err, "numeric user and group (runAsNonRoot needs a numeric user): %q", cfg.Config.User)
		assert.NotZero(t, n, "not root: %q", cfg.Config.User)
	}
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, runtime.GOARCH, cfg.Architecture)
	require.Equal(t, []string{digest(lay)}, cfg.RootFS.DiffIDs, "diff_id is the uncompressed layer's digest")
	assert.Equal(t, "layers", cfg.RootFS.Type)

	// OCI layout over the same blobs.
	assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	require.Len(t, index.Manifests, 1)
	assert.Equal(t, "docker.io/library/kubevirt-ovn:latest", index.Manifests[0].Annotations["io.containerd.image.name"])
	om, ok := files[blobPath(index.Manifests[0].Digest)]
	require.True(t, ok)
	assert.Equal(t, index.Manifests[0].Size, len(om))
	var oci struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(om, &oci))
	assert.Equal(t, digest(cfgJSON), oci.Config.Digest)
	require.Len(t, oci.Layers, 1)
	assert.Equal(t, digest(lay), oci.Layers[0].Digest)
	assert.Equal(t, len(lay), oci.Layers[0].Size)

	// The layer: the binary, executable by anyone, and /tmp.
	layFiles, layHeaders := readTar(t, lay)
	h, ok := layHeaders["kubevirt-ovn"]
	require.True(t, ok, "layer has /kubevirt-ovn: %v", keys(layHeaders))
	assert.Equal(t, byte(tar.TypeReg), h.Typeflag)
	assert.Equal(t, int64(0o755), h.Mode)
	if h, ok := layHeaders["tmp/"]; assert.True(t, ok, "layer has /tmp") {
		assert.Equal(t, int64(0o1777), h.Mode)
	}
	assert.Contains(t, string(layFiles["etc/passwd"]), ":"+uid+":"+gid+":", "passwd names the image's user")

	bin := filepath.Join(t.TempDir(), "kubevirt-ovn")
	require.NoError(t, os.WriteFile(bin, layFiles["kubevirt-ovn"], 0o755))
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "static binary: no program interpreter")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "static binary: no dynamic section")
	}
	libs, _ := f.ImportedLibraries()
	assert.Empty(t, libs)
	if runtime.GOARCH == "amd64" {
		assert.Equal(t, elf.EM_X86_64, f.Machine)
	}

	// Without a command: the usage on stderr, exit status 2.
	code, _, stderr := runBinary(t, bin)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "Usage:\n  kubevirt-ovn [flags]")
	for _, cmd := range []string{"sync", "run"} {
		code, stdout, _ := runBinary(t, bin, cmd, "-h")
		assert.Equal(t, 0, code, "%s -h", cmd)
		assert.True(t, strings.Contains(stdout, "Usage:\n  kubevirt-ovn "+cmd+" "), "%s -h prints its usage: %q", cmd, stdout)
		assert.Contains(t, stdout, "--nb-cert", "%s -h", cmd)
	}
}

func runBinary(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The same binary gives the same archive: nothing in it depends on the
// time or the machine of the build.
func TestImageArchiveReproducible(t *testing.T) {
	a, err := imageArchive([]byte("binary"), DefaultTag, "amd64", buildTime())
	require.NoError(t, err)
	b, err := imageArchive([]byte("binary"), DefaultTag, "amd64", buildTime())
	require.NoError(t, err)
	assert.Equal(t, digest(a), digest(b))
	assert.Error(t, Build(context.Background(), Options{Out: filepath.Join(t.TempDir(), "x.tar"), Tag: "no-tag"}))
}

// deploy/Containerfile, for those with a container engine, builds what
// Build builds: a static binary with the go.mod's Go on an empty base, the
// same user and entrypoint.
func TestContainerfileMatches(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "Containerfile"))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	require.NoError(t, err)
	var goVersion string
	for _, l := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			parts := strings.Split(strings.TrimSpace(v), ".")
			require.GreaterOrEqual(t, len(parts), 2)
			goVersion = parts[0] + "." + parts[1]
		}
	}
	require.NotEmpty(t, goVersion)

	var froms []string
	var user, entrypoint, build string
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, strings.Join(f[1:], " "))
		case "USER":
			user = strings.Join(f[1:], " ")
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		case "RUN":
			if strings.Contains(l, "go build") {
				build = l
			}
		}
	}
	require.Len(t, froms, 2)
	assert.Contains(t, froms[0], "golang:"+goVersion+" ", "builder on the go.mod's Go %s", goVersion)
	assert.Equal(t, "scratch", froms[1])
	assert.Equal(t, User, user)
	ep, err := json.Marshal([]string{BinaryPath})
	require.NoError(t, err)
	assert.Equal(t, string(ep), entrypoint)
	for _, w := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/kubevirt-ovn", "/rootfs" + BinaryPath} {
		assert.Contains(t, build, w)
	}
}

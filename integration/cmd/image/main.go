// Command image builds the kubevirt-ovn container image without a container
// engine: a static kubevirt-ovn binary (CGO_ENABLED=0, -trimpath) in one
// layer on an empty base, written as an image archive that `docker load`,
// `podman load`, `kind load image-archive` and `skopeo copy
// docker-archive:...` accept. deploy/Containerfile builds the same image
// with an engine.
//
//	go run ./integration/cmd/image [-o bin/kubevirt-ovn-image.tar] [-tag kubevirt-ovn:latest] [-arch amd64]
//
// The archive holds both layouts `docker save` writes since Docker 25: the
// docker-archive manifest.json (Config and Layers paths, RepoTags) and an
// OCI image layout (oci-layout, index.json), over the same blobs.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// What the image runs as and where: deploy/deployment.yaml relies on
// them (runAsNonRoot needs a numeric user).
const (
	BinaryPath = "/kubevirt-ovn"
	User       = "65532:65532"
	DefaultTag = "kubevirt-ovn:latest"
)

func main() {
	var o Options
	flag.StringVar(&o.Out, "o", filepath.Join("bin", "kubevirt-ovn-image.tar"), "image archive to write")
	flag.StringVar(&o.Tag, "tag", DefaultTag, "name:tag the archive carries")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image")
	flag.StringVar(&o.Package, "pkg", "./cmd/kubevirt-ovn", "package of the binary")
	flag.Parse()
	start := time.Now()
	if err := Build(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fi, err := os.Stat(o.Out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s, linux/%s, %.1f MiB) in %s\n", o.Out, o.Tag, o.Arch, float64(fi.Size())/(1<<20), time.Since(start).Round(100*time.Millisecond))
}

// Options say what Build builds and where it writes it.
type Options struct {
	Out     string // the image archive
	Tag     string // name:tag, DefaultTag when empty
	Arch    string // GOARCH, runtime.GOARCH when empty
	Package string // the binary's package, ./cmd/kubevirt-ovn when empty
	// Dir is the module directory go build runs in; the current one when
	// empty.
	Dir string
}

// Build compiles the static binary and writes the image archive to
// o.Out (through a temporary file: a failed build leaves no archive).
func Build(ctx context.Context, o Options) error {
	if o.Tag == "" {
		o.Tag = DefaultTag
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Package == "" {
		o.Package = "./cmd/kubevirt-ovn"
	}
	if !strings.Contains(o.Tag, ":") {
		return fmt.Errorf("tag %q has no :TAG", o.Tag)
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "kubevirt-ovn")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build of %s for linux/%s failed: %w\n%s", o.Package, o.Arch, err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	archive, err := imageArchive(binary, o.Tag, o.Arch, buildTime())
	if err != nil {
		return err
	}
	part := filepath.Join(tmp, "image.tar")
	if err := os.WriteFile(part, archive, 0o644); err != nil {
		return err
	}
	return os.Rename(part, o.Out)
}

// buildTime is SOURCE_DATE_EPOCH when set (reproducible builds), else the
// Unix epoch: the same sources give the same archive.
func buildTime() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// The image's files besides the binary: a FROM-scratch image has none.
// /tmp for os.TempDir (writable only where the root filesystem is), and a
// passwd and group naming the non-root user.
var baseFiles = []struct {
	name string
	mode int64
	body string
}{
	{"etc/", 0o755, ""},
	{"etc/passwd", 0o644, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
	{"etc/group", 0o644, "root:x:0:\nnonroot:x:65532:\n"},
	{"home/", 0o755, ""},
	{"home/nonroot/", 0o700, ""},
	{"tmp/", 0o1777, ""},
}

// layer is the image's only layer, an uncompressed tar.
func layer(binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, body []byte, uid int) error {
		h := &tar.Header{Name: name, Mode: mode, ModTime: mtime, Uid: uid, Gid: uid, Format: tar.FormatPAX}
		if strings.HasSuffix(name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, f := range baseFiles {
		uid := 0
		if f.name == "home/nonroot/" {
			uid = 65532
		}
		if err := add(f.name, f.mode, []byte(f.body), uid); err != nil {
			return nil, err
		}
	}
	if err := add(strings.TrimPrefix(BinaryPath, "/"), 0o755, binary, 0); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Config is the image configuration (the OCI image spec's, which Docker
// reads too), as much of it as this image sets.
type Config struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		User       string   `json:"User"`
		Entrypoint []string `json:"Entrypoint"`
		Env        []string `json:"Env,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	} `json:"history"`
}

// DockerManifest is one entry of a docker-archive's manifest.json.
type DockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

// imageArchive builds the whole archive in memory.
func imageArchive(binary []byte, tag, arch string, created time.Time) ([]byte, error) {
	lay, err := layer(binary, created)
	if err != nil {
		return nil, err
	}
	layerDigest := digest(lay)
	var cfg Config
	cfg.Architecture, cfg.OS, cfg.Created = arch, "linux", created.Format(time.RFC3339)
	cfg.Config.User = User
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.WorkingDir = "/"
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{layerDigest}
	cfg.History = append(cfg.History, struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	}{cfg.Created, "kubevirt-ovn integration/cmd/image: static kubevirt-ovn on an empty base"})
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgDigest := digest(cfgJSON)
	ociManifest, err := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        descriptor   `json:"config"`
		Layers        []descriptor `json:"layers"`
	}{2, "application/vnd.oci.image.manifest.v1+json",
		descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: cfgDigest, Size: len(cfgJSON)},
		[]descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: len(lay)}}})
	if err != nil {
		return nil, err
	}
	name := tag
	if !strings.Contains(strings.Split(name, "/")[0], ".") && !strings.HasPrefix(name, "localhost") {
		// The name containerd (kind, k3s) gives "kubevirt-ovn:latest".
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	index, err := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{2, "application/vnd.oci.image.index.v1+json", []descriptor{{
		MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(ociManifest), Size: len(ociManifest),
		Annotations: map[string]string{
			"io.containerd.image.name":          name,
			"org.opencontainers.image.ref.name": tag[strings.LastIndex(tag, ":")+1:],
		},
	}}})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal([]DockerManifest{{Config: blobPath(cfgDigest), RepoTags: []string{tag}, Layers: []string{blobPath(layerDigest)}}})
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"blobs/", nil},
		{"blobs/sha256/", nil},
		{blobPath(layerDigest), lay},
		{blobPath(cfgDigest), cfgJSON},
		{blobPath(digest(ociManifest)), ociManifest},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"manifest.json", manifest},
	} {
		h := &tar.Header{Name: f.name, Mode: 0o644, ModTime: created, Typeflag: tar.TypeReg, Size: int64(len(f.body)), Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

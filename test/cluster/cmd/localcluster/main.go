// Command localcluster builds, starts, checks and stops the single-node Kubernetes cluster
// that the driver is developed and tested on. The make targets cluster-build, cluster-up,
// cluster-down, cluster-status and cluster-smoke call it; see docs/local-cluster.md.
//
//	localcluster [flags] build|up|down|status|smoke
//	localcluster [flags] import ARCHIVE...   (OCI archives into containerd's k8s.io namespace)
//	localcluster [flags] image               (build the driver image as an OCI archive)
//	localcluster [flags] install|uninstall   (the driver's chart in mock mode)
//	localcluster [flags] restart COMPONENT   (e.g. kubelet: same command line, new process)
//	localcluster [flags] fixture PROFILE     (the mock node becomes PROFILE; "default" is the cluster's own)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/driverimage"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/localcluster"
)

// envOr returns the environment variable's value, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	wd, _ := os.Getwd()
	repo := flag.String("repo", envOr("LOCALCLUSTER_REPO", wd), "repository root (env LOCALCLUSTER_REPO)")
	cacheDir := flag.String("cache", os.Getenv("LOCALCLUSTER_CACHE"), "binary cache directory; default <repo>/_output/cluster-cache (env LOCALCLUSTER_CACHE)")
	goCmd := flag.String("go", envOr("GO", "go"), "go command (env GO)")
	containerd := flag.String("containerd-version", envOr("CONTAINERD_VERSION", "v2.4.2"), "containerd release built with go install (env CONTAINERD_VERSION)")
	kubeVersion := flag.String("kube-version", os.Getenv("KUBE_VERSION"), "Kubernetes release to build and run, e.g. v1.34.4; default: the one test/go.mod requires (env KUBE_VERSION)")
	gates := flag.String("feature-gates", os.Getenv("FEATURE_GATES"), "feature gates for every component, A=true,B=false (env FEATURE_GATES)")
	runtimeCfg := flag.String("runtime-config", envOr("RUNTIME_CONFIG", localcluster.DefaultRuntimeConfig), "kube-apiserver --runtime-config (env RUNTIME_CONFIG)")
	fixture := flag.String("fixture", os.Getenv("FIXTURE"), "node tree with sys/ and dev/ to expose as the mock node; empty: write the default profile (env FIXTURE)")
	profile := flag.String("mock-profile", envOr("MOCK_PROFILE", "dgx-h100"), "rdma-dra mock-node profile of the default fixture (env MOCK_PROFILE)")
	skipSmoke := flag.Bool("skip-smoke", os.Getenv("SKIP_SMOKE") == "1", "do not run the smoke test at the end of up (env SKIP_SMOKE=1)")
	verbosity := flag.Int("v", 2, "klog verbosity of the components")
	var d driverFlags
	flag.StringVar(&d.version, "version", os.Getenv("VERSION"), "image: tag and stamped version of the driver image (env VERSION)")
	flag.StringVar(&d.ldflags, "ldflags", os.Getenv("LDFLAGS"), "image: go linker flags, the Makefile's (env LDFLAGS)")
	flag.StringVar(&d.tags, "tags", os.Getenv("GO_TAGS"), "image: go build tags of the binaries, comma-separated; none for a release image, failpoint for the e2e suite's (env GO_TAGS)")
	flag.StringVar(&d.revision, "revision", os.Getenv("GIT_COMMIT"), "image: git commit of the image's revision label (env GIT_COMMIT)")
	flag.StringVar(&d.outDir, "image-dir", envOr("IMAGE_DIR", "_output/images"), "image: output directory of binaries and archive (env IMAGE_DIR)")
	flag.StringVar(&d.repository, "image-repository", envOr("IMAGE_REPOSITORY", driverimage.DefaultRepository), "image/install: image name without tag (env IMAGE_REPOSITORY)")
	flag.StringVar(&d.sourceRef, "image-source", os.Getenv("IMAGE_SOURCE"), "image: build this git revision (e.g. HEAD) instead of the working tree (env IMAGE_SOURCE)")
	flag.StringVar(&d.helm, "helm", envOr("HELM", "_output/bin/helm"), "install/uninstall: helm binary (env HELM)")
	flag.StringVar(&d.values, "driver-values", os.Getenv("DRIVER_VALUES"), "install: extra chart values files, comma-separated (env DRIVER_VALUES)")
	flag.StringVar(&d.archive, "image-archive", os.Getenv("IMAGE_ARCHIVE"), "install: OCI archive to import first; default: the one image writes for -version (env IMAGE_ARCHIVE)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: localcluster [flags] build|up|down|status|smoke|image|install|uninstall\n       localcluster [flags] import ARCHIVE...\n       localcluster [flags] restart COMPONENT\n       localcluster [flags] fixture PROFILE|default\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	takesOne := flag.Arg(0) == "restart" || flag.Arg(0) == "fixture"
	if flag.NArg() < 1 || (flag.Arg(0) != "import" && !takesOne && flag.NArg() != 1) || (takesOne && flag.NArg() != 2) {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, log, flag.Args(), *repo, *cacheDir, *goCmd, *containerd, *kubeVersion, localcluster.Options{
		FeatureGates: *gates, RuntimeConfig: *runtimeCfg, Fixture: *fixture, MockProfile: *profile,
		SkipSmoke: *skipSmoke, Verbosity: *verbosity,
	}, d)
	stop()
	if err != nil {
		log.Error("localcluster "+flag.Arg(0)+" failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, args []string, repo, cacheDir, goCmd, containerdVersion, kubeVersion string, o localcluster.Options, d driverFlags) error {
	cmd := args[0]
	repo, err := filepath.Abs(repo)
	if err != nil {
		return fmt.Errorf("repository path: %w", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "test", "go.mod")); err != nil {
		return fmt.Errorf("%s is not the repository root (no test/go.mod); pass -repo", repo)
	}
	if p, err := exec.LookPath(goCmd); err == nil {
		goCmd = p
	} else if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		goCmd = "/usr/local/go/bin/go"
	}
	if cmd == "image" {
		return d.buildImage(ctx, log, repo, goCmd)
	}
	if cmd == "up" || cmd == "down" || cmd == "smoke" || cmd == "import" || cmd == "install" || cmd == "uninstall" || cmd == "restart" || cmd == "fixture" {
		if err := localcluster.CheckHost(); err != nil {
			return err
		}
	}
	layout := localcluster.NewLayout(repo)
	if cacheDir != "" {
		if layout.Cache, err = filepath.Abs(cacheDir); err != nil {
			return fmt.Errorf("cache path: %w", err)
		}
	}
	bins, err := bincache.New(ctx, layout.Cache, filepath.Join(repo, "test"), goCmd, containerdVersion, kubeVersion, log)
	if err != nil {
		return err
	}
	c := &localcluster.Cluster{Layout: layout, Bins: bins, Log: log, Go: goCmd}
	switch cmd {
	case "build":
		if err := bins.EnsureAll(ctx); err != nil {
			return err
		}
		return c.LinkKubectl()
	case "up":
		if err := bins.EnsureAll(ctx); err != nil {
			return err
		}
		return c.Up(ctx, o)
	case "down":
		if err := c.Down(ctx); err != nil {
			return err
		}
		log.Info("cluster down; logs kept", "logs", layout.Logs())
		return nil
	case "status":
		return c.Status(ctx)
	case "smoke":
		return c.Smoke(ctx)
	case "import":
		for _, a := range args[1:] {
			if err := localcluster.ImportArchive(ctx, layout, bins, a); err != nil {
				return err
			}
			log.Info("imported", "archive", a)
		}
		return nil
	case "install":
		return c.InstallDriver(ctx, d.installOptions(repo))
	case "uninstall":
		return c.UninstallDriver(ctx, d.helm)
	case "restart":
		return c.RestartComponent(ctx, args[1])
	case "fixture":
		return c.UseFixture(ctx, args[1])
	default:
		return errors.New("unknown command " + cmd + "; want build, up, down, status, smoke, import, image, install, uninstall, restart or fixture")
	}
}

/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

// BinDirEnv names the environment variable that points at the folder holding
// the control-plane binaries; the Makefile exports it.
const BinDirEnv = "PROVFLEET_CONTROLPLANE_BIN"

// ServiceClusterIPRange is the Service IP range of the control plane.
const ServiceClusterIPRange = "10.0.0.0/24"

// ControllerManagerControllers are the kube-controller-manager controllers a
// provisioner talks to: the binder annotates and binds claims, the protection
// controllers hold objects in use, the namespace controller empties deleted
// namespaces, and the expander leaves the claims of volumes no in-tree plugin
// expands to an external resizer, as in a cluster.
var ControllerManagerControllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolume-expander-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"namespace-controller",
}

// Options tunes Start. The zero value works.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Empty:
	// $PROVFLEET_CONTROLPLANE_BIN, else _output/controlplane of the repository.
	BinDir string
	// CRDDir holds CustomResourceDefinition YAML installed once the control
	// plane is up. Empty: crds/ of the repository, skipped when missing.
	CRDDir string
	// ControllerManagerQPS and ControllerManagerBurst bound the client of
	// kube-controller-manager; the PV binder makes about five writes per claim.
	// Zero: 100 and 200.
	ControllerManagerQPS   float32
	ControllerManagerBurst int
	// PVClaimBinderSyncPeriod is how often the PV binder looks at every claim
	// and volume again. Zero: kube-controller-manager's default (15s).
	PVClaimBinderSyncPeriod time.Duration
	// StartTimeout bounds the wait for each server to get ready. Zero: 3m.
	StartTimeout time.Duration
	// AuditPolicy, when set, is an audit policy (YAML) kube-apiserver
	// applies, writing one JSON line per event to AuditLogPath(): a
	// history of what was written, as the apiserver carried it out.
	AuditPolicy string
}

func (o Options) withDefaults() (Options, error) {
	if o.BinDir == "" {
		o.BinDir = os.Getenv(BinDirEnv)
	}
	if o.BinDir == "" || o.CRDDir == "" {
		root, err := RepoRoot()
		if err != nil {
			return o, err
		}
		if o.BinDir == "" {
			o.BinDir = filepath.Join(root, "_output", "controlplane")
		}
		if o.CRDDir == "" {
			o.CRDDir = filepath.Join(root, "crds")
		}
	}
	if o.ControllerManagerQPS == 0 {
		o.ControllerManagerQPS = 100
	}
	if o.ControllerManagerBurst == 0 {
		o.ControllerManagerBurst = 200
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	return o, nil
}

// Environment is a running control plane. Stop it when done.
type Environment struct {
	binDir      string
	dir         string
	admin       *rest.Config
	adminConfig string
	servers     []*server
	watchdog    *watchdog
	stopOnce    sync.Once
}

// Start runs etcd, kube-apiserver and kube-controller-manager on loopback and
// returns once the API serves, the default namespace exists, the PV binder runs
// and every CRD of Options.CRDDir is Established. On error nothing is left
// running.
func Start(ctx context.Context, opts Options) (_ *Environment, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	binaries, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "provfleet-e2e-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the control-plane folder: %w", err)
	}
	env := &Environment{binDir: opts.BinDir, dir: dir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, env.logTails(60))
			env.Stop()
		}
	}()
	if env.watchdog, err = startWatchdog(dir); err != nil {
		return nil, err
	}
	files, err := writeCredentials(dir)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)

	etcdURL, err := env.startEtcd(ctx, binaries["etcd"], opts.StartTimeout)
	if err != nil {
		return nil, err
	}
	logger.V(2).Info("etcd is ready", "url", etcdURL)

	if err := env.startAPIServer(ctx, binaries["kube-apiserver"], etcdURL, files, opts); err != nil {
		return nil, err
	}
	logger.V(2).Info("kube-apiserver is ready", "host", env.admin.Host)

	if err := env.startControllerManager(ctx, binaries["kube-controller-manager"], files, opts); err != nil {
		return nil, err
	}
	logger.V(2).Info("kube-controller-manager is ready")

	if err := env.installCRDs(ctx, opts.CRDDir, opts.StartTimeout); err != nil {
		return nil, err
	}
	return env, nil
}

// findBinaries returns the paths of the control plane's servers in binDir,
// by name.
func findBinaries(binDir string) (map[string]string, error) {
	binaries := map[string]string{}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		path := filepath.Join(binDir, name)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("cannot find %s in %s (run make controlplane, or set %s): %w", name, binDir, BinDirEnv, err)
		}
		binaries[name] = path
	}
	return binaries, nil
}

// credentialFiles are the paths of the PEM files the servers read.
type credentialFiles struct {
	ca, servingCert, servingKey, saPrivate, saPublic string
	admin, controllerManager                         keyPair
	caPEM                                            []byte
}

func writeCredentials(dir string) (credentialFiles, error) {
	ca, err := newCertificateAuthority()
	if err != nil {
		return credentialFiles{}, err
	}
	serving, err := ca.serving("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")})
	if err != nil {
		return credentialFiles{}, err
	}
	admin, err := ca.client("provfleet-e2e-admin", "system:masters")
	if err != nil {
		return credentialFiles{}, err
	}
	// kube-controller-manager runs its controllers with its own client, so it
	// needs more than the system:kube-controller-manager role grants.
	controllerManager, err := ca.client("system:kube-controller-manager", "system:masters")
	if err != nil {
		return credentialFiles{}, err
	}
	saPrivate, saPublic, err := serviceAccountKeys()
	if err != nil {
		return credentialFiles{}, err
	}
	files := credentialFiles{
		ca:                filepath.Join(dir, "ca.crt"),
		servingCert:       filepath.Join(dir, "apiserver.crt"),
		servingKey:        filepath.Join(dir, "apiserver.key"),
		saPrivate:         filepath.Join(dir, "sa.key"),
		saPublic:          filepath.Join(dir, "sa.pub"),
		admin:             admin,
		controllerManager: controllerManager,
		caPEM:             ca.certPEM,
	}
	for path, data := range map[string][]byte{
		files.ca:          ca.certPEM,
		files.servingCert: serving.certPEM,
		files.servingKey:  serving.keyPEM,
		files.saPrivate:   saPrivate,
		files.saPublic:    saPublic,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return credentialFiles{}, fmt.Errorf("cannot write %s: %w", filepath.Base(path), err)
		}
	}
	return files, nil
}

func (e *Environment) start(name, binary string, args ...string) (*server, error) {
	s, err := startServer(name, binary, filepath.Join(e.dir, name+".log"), args...)
	if err != nil {
		return nil, err
	}
	e.servers = append(e.servers, s)
	if err := e.watchdog.watch(s.Pid()); err != nil {
		return nil, err
	}
	return s, nil
}

func (e *Environment) startEtcd(ctx context.Context, binary string, timeout time.Duration) (string, error) {
	clientPort, err := freePort()
	if err != nil {
		return "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	s, err := e.start("etcd", binary,
		"--name=e2e",
		"--data-dir="+filepath.Join(e.dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		// Throw-away data: durability only costs test time.
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return "", err
	}
	healthy := func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, clientURL+"/health")
	}
	if err := waitFor(ctx, s, timeout, "etcd to be healthy", healthy); err != nil {
		return "", err
	}
	return clientURL, nil
}

func (e *Environment) startAPIServer(ctx context.Context, binary, etcdURL string, files credentialFiles, opts Options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args := e.apiServerArgs(etcdURL, port, files)
	if opts.AuditPolicy != "" {
		policy := filepath.Join(e.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(opts.AuditPolicy), 0o600); err != nil {
			return fmt.Errorf("cannot write the audit policy: %w", err)
		}
		// Blocking: a request is answered only once its event is written,
		// so the log misses nothing the apiserver carried out.
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+e.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0")
	}
	s, err := e.start("kube-apiserver", binary, args...)
	if err != nil {
		return err
	}
	e.admin = clientCertConfig("https://127.0.0.1:"+strconv.Itoa(port), files.caPEM, files.admin)
	e.admin.QPS, e.admin.Burst = 100, 200
	e.adminConfig = filepath.Join(e.dir, "admin.kubeconfig")
	if err := WriteKubeconfig(e.adminConfig, e.admin); err != nil {
		return err
	}
	return e.waitAPIServerReady(ctx, s, opts.StartTimeout)
}

// apiServerArgs are the flags of kube-apiserver on port, with its data in etcd
// at etcdURL.
func (e *Environment) apiServerArgs(etcdURL string, port int, files credentialFiles) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.dir, "apiserver-certs"),
		"--tls-cert-file=" + files.servingCert,
		"--tls-private-key-file=" + files.servingKey,
		"--client-ca-file=" + files.ca,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + files.saPublic,
		"--service-account-signing-key-file=" + files.saPrivate,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		// No Endpoints for the kubernetes Service: there is no network behind it.
		"--endpoint-reconciler-type=none",
		"--authorization-mode=Node,RBAC",
		// On by default; named so that no default change can drop the
		// node agents' restriction (examples/deploy/node-restriction.yaml).
		"--enable-admission-plugins=ValidatingAdmissionPolicy",
		"--profiling=false",
		"--v=1",
	}
}

// waitAPIServerReady waits until kube-apiserver is ready and has created the
// default namespace.
func (e *Environment) waitAPIServerReady(ctx context.Context, s *server, timeout time.Duration) error {
	httpClient, err := rest.HTTPClientFor(e.admin)
	if err != nil {
		return fmt.Errorf("cannot build the admin HTTP client: %w", err)
	}
	ready := func(ctx context.Context) error {
		return httpOK(ctx, httpClient, e.admin.Host+"/readyz")
	}
	if err := waitFor(ctx, s, timeout, "kube-apiserver to be ready", ready); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(e.admin)
	if err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	defaultNamespace := func(ctx context.Context) error {
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	}
	return waitFor(ctx, s, timeout, "the default namespace", defaultNamespace)
}

func (e *Environment) startControllerManager(ctx context.Context, binary string, files credentialFiles, opts Options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(e.dir, "controller-manager.kubeconfig")
	if err := WriteKubeconfig(kubeconfig, clientCertConfig(e.admin.Host, files.caPEM, files.controllerManager)); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(ControllerManagerControllers, ","),
		"--kube-api-qps=" + strconv.FormatFloat(float64(opts.ControllerManagerQPS), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(opts.ControllerManagerBurst),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.dir, "controller-manager-certs"),
		// Anonymous health checks: no authorization kubeconfig is needed.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez",
		"--v=2",
	}
	if opts.PVClaimBinderSyncPeriod > 0 {
		args = append(args, "--pvclaimbinder-sync-period="+opts.PVClaimBinderSyncPeriod.String())
	}
	s, err := e.start("kube-controller-manager", binary, args...)
	if err != nil {
		return err
	}
	// The verbose health report lists a check per controller once the
	// controllers are built; every one of ours must be there and pass.
	insecure := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // #nosec G402 -- self-signed loopback certificate of a test server
	}}
	defer insecure.CloseIdleConnections()
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz?verbose=true"
	running := func(ctx context.Context) error {
		body, err := httpGet(ctx, insecure, url)
		if err != nil {
			return err
		}
		for _, name := range ControllerManagerControllers {
			if !strings.Contains(body, "[+]"+name+" ok") {
				return fmt.Errorf("controller %s is not running yet", name)
			}
		}
		return nil
	}
	return waitFor(ctx, s, opts.StartTimeout, "the controllers of kube-controller-manager to run", running)
}

// WriteKubeconfig writes a kubeconfig file that authenticates like config
// (a bearer token or client certificates).
func WriteKubeconfig(path string, config *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["provfleet"] = &clientcmdapi.Cluster{
		Server:                   config.Host,
		CertificateAuthorityData: config.CAData,
		CertificateAuthority:     config.CAFile,
	}
	kc.AuthInfos["provfleet"] = &clientcmdapi.AuthInfo{
		Token:                 config.BearerToken,
		ClientCertificateData: config.CertData,
		ClientKeyData:         config.KeyData,
		ClientCertificate:     config.CertFile,
		ClientKey:             config.KeyFile,
	}
	kc.Contexts["provfleet"] = &clientcmdapi.Context{Cluster: "provfleet", AuthInfo: "provfleet"}
	kc.CurrentContext = "provfleet"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("cannot write kubeconfig %s: %w", path, err)
	}
	return nil
}

// clientCertConfig is a rest.Config that authenticates with a client
// certificate.
func clientCertConfig(host string, caPEM []byte, user keyPair) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: user.certPEM,
			KeyData:  user.keyPEM,
		},
	}
}

// waitFor polls check until it returns nil, the server exits or the timeout
// passes; the error then says what check last reported.
func waitFor(ctx context.Context, s *server, timeout time.Duration, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.exited(); err != nil {
			return false, err
		}
		last = check(ctx)
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case last == nil:
		return fmt.Errorf("cannot wait for %s: %w", what, err)
	default:
		return fmt.Errorf("cannot wait for %s: %w (last: %w)", what, err, last)
	}
}

// httpOK returns nil once GET url answers 200 OK, else what it answered.
func httpOK(ctx context.Context, client *http.Client, url string) error {
	_, err := httpGet(ctx, client, url)
	return err
}

// httpGet returns the start of the body of a 200 OK answer to GET url.
func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("cannot build a request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot GET %s: %w", url, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

// Config returns a copy of the admin rest.Config (user in system:masters).
func (e *Environment) Config() *rest.Config {
	return rest.CopyConfig(e.admin)
}

// AuditLogPath is the file of the apiserver's audit events, written when
// Options.AuditPolicy is set.
func (e *Environment) AuditLogPath() string {
	return filepath.Join(e.dir, "audit.log")
}

// AdminKubeconfigPath is a kubeconfig file for the admin user, for kubectl or
// for a binary under test. It is removed by Stop.
func (e *Environment) AdminKubeconfigPath() string {
	return e.adminConfig
}

// BinDir is the folder of the control-plane binaries, kubectl included.
func (e *Environment) BinDir() string {
	return e.binDir
}

// Stop kills the servers, newest first, and removes the Environment's folder
// with their logs. It is safe to call more than once.
func (e *Environment) Stop() {
	e.stopOnce.Do(func() {
		for i := len(e.servers) - 1; i >= 0; i-- {
			e.servers[i].stop()
		}
		if e.watchdog != nil {
			e.watchdog.disarm()
		}
		_ = os.RemoveAll(e.dir)
	})
}

// DumpLogs writes the last lines of each server's log to w. Call it before Stop,
// which removes the logs.
func (e *Environment) DumpLogs(w io.Writer) {
	_, _ = io.WriteString(w, e.logTails(100))
}

func (e *Environment) logTails(lines int) string {
	var b strings.Builder
	for _, s := range e.servers {
		fmt.Fprintf(&b, "===== last %d lines of %s =====\n%s\n", lines, s.Name(), tail(s.LogPath(), lines))
	}
	return b.String()
}

// RepoRoot is the folder of the repository's go.mod, found by walking up from
// the working directory (a test runs in its package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot get the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("cannot look for go.mod in %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

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

package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
)

// What local-path-provisioner (its main.go and provisioner.go) reads, and
// the releases that brought what provfleet cannot map yet.
const (
	localPathDefaultName      = "rancher.io/local-path"
	localPathDefaultConfigMap = "local-path-config"
	localPathConfigKey        = "config.json"
	localPathSetupKey         = "setup"
	localPathTeardownKey      = "teardown"
	// localPathDefaultNode is the nodePathMap entry of every node it does
	// not list.
	localPathDefaultNode = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
	// localPathAnnSelectedNode is the node it made a volume on, written on
	// each PersistentVolume from v0.0.25 on.
	localPathAnnSelectedNode = "local.path.provisioner/selected-node"
	// localPathPattern is its directory name, <PV>_<namespace>_<claim>.
	localPathPattern = "{{.PVName}}_{{.PVC.Namespace}}_{{.PVC.Name}}"
	// maxNodePaths is how many paths a hostPath backend serves on a node:
	// path and up to 16 additionalPaths.
	maxNodePaths = 17
)

// The features of local-path-provisioner that a release may lack or that
// have no mapping yet, each with the release that brought it.
var (
	localPathSharedFS        = feature{"sharedFileSystemPath", "v0.0.23"}
	localPathClassConfigs    = feature{"storageClassConfigs", "v0.0.27"}
	localPathNodeAffinityKey = feature{"nodeAffinityKey", "v0.0.35"}
	// localPathPermissions renders the patterns for the setup script,
	// which applies them where it has the lines below.
	localPathPermissions = feature{"userPattern, groupPattern and permPattern", "v0.0.37"}
)

// The lines of a setup script provfleet does itself, written with $VOL_X
// (scriptSteps reads ${VOL_X} so): local-path's stock one, then those of
// its documentation that apply the class patterns.
const (
	setupMkdir = `mkdir -m 0777 -p "$VOL_DIR"`
	setupChown = `chown "$VOL_USER:$VOL_GROUP" "$VOL_DIR"`
	setupChmod = `chmod "$VOL_PERM" "$VOL_DIR"`
)

// setupLines maps each line that may follow setupMkdir onto the patterns
// the hostPath backend applies for it.
var setupLines = map[string]v1alpha1.LocalPathPattern{
	setupChown: v1alpha1.LocalPathPatternOwner,
	setupChmod: v1alpha1.LocalPathPatternMode,
}

// feature is a local-path-provisioner feature and its first release.
type feature struct{ name, since string }

func (f feature) String() string {
	return fmt.Sprintf("%s (local-path-provisioner %s)", f.name, f.since)
}

// in reports whether release, such as v0.0.34, has f; a release that cannot
// be read is taken to have it, so that nothing in doubt is ignored.
func (f feature) in(release string) bool {
	v, err := version.ParseGeneric(release)
	if err != nil {
		return true
	}
	return v.AtLeast(version.MustParseGeneric(f.since))
}

// localPathConfig is the config.json of local-path's ConfigMap.
type localPathConfig struct {
	localPathStorage
	StorageClassConfigs map[string]json.RawMessage `json:"storageClassConfigs"`
	SetupCommand        string                     `json:"setupCommand"`
	TeardownCommand     string                     `json:"teardownCommand"`
}

// localPathStorage is where local-path keeps volumes: the paths of each
// node, or one file system every node mounts at the same path.
type localPathStorage struct {
	NodePathMap          []nodePathEntry `json:"nodePathMap"`
	SharedFileSystemPath string          `json:"sharedFileSystemPath"`
}

// nodePathEntry is an entry of nodePathMap: a node, or the default, and its paths.
type nodePathEntry struct {
	Node  string   `json:"node"`
	Paths []string `json:"paths"`
}

// planLocalPath plans the takeover of a local-path-provisioner by a
// hostPath backend on the node agents.
func (p *Plan) planLocalPath(ctx context.Context, client kubernetes.Interface, in *install, name string) error {
	p.OldName = localPathProvisionerName(in)
	configMap, err := readLocalPathConfigMap(ctx, client, in)
	if err != nil {
		return err
	}
	object := "ConfigMap " + configMap.Namespace + "/" + configMap.Name
	var config localPathConfig
	if err := json.Unmarshal([]byte(configMap.Data[localPathConfigKey]), &config); err != nil {
		p.refuse(object, "cannot read %s: %v", localPathConfigKey, err)
		return nil
	}
	patterns := p.checkSetup(object, config.SetupCommand, configMap.Data)
	p.checkTeardown(object, config.TeardownCommand, configMap.Data)
	classes := in.classesOf(p.OldName)
	for _, class := range classes {
		p.notePatterns(class, patterns)
	}
	p.ignoreUnread(&config)
	if len(config.StorageClassConfigs) > 0 {
		p.planClassConfigs(object, name, config, in, patterns)
		return nil
	}
	if config.SharedFileSystemPath != "" && len(config.NodePathMap) == 0 {
		p.planSharedFileSystem(object, name, sharedPaths{fallback: config.SharedFileSystemPath}, in, patterns)
		return nil
	}
	paths := p.nodePaths(object, config.localPathStorage)
	affinityKey := p.nodeAffinityKey(classes)
	if paths == nil {
		return nil
	}
	hp := paths.hostPath(p.volumeType(classes))
	hp.NodeAffinityKey = affinityKey
	hp.LocalPathPatterns = patterns
	p.newConfig(name, p.OldName, v1alpha1.BackendSpec{HostPath: hp})
	p.planNodeVolumes(paths, in, nil)
	return nil
}

// planNodeVolumes decides the fate of every volume of local-path's on
// node paths, all of them those of bases; listed, unless nil, are the
// StorageClasses of storageClassConfigs.
func (p *Plan) planNodeVolumes(bases *nodeBases, in *install, listed []string) {
	for _, pv := range in.volumesOf(p.OldName) {
		if listed != nil && !slices.Contains(listed, pv.Spec.StorageClassName) {
			p.planUnlistedVolume(bases, pv)
			continue
		}
		p.planLocalPathVolume(bases, pv, in.classes[pv.Spec.StorageClassName])
	}
	p.noteAdoptable()
	p.Notes = append(p.Notes, fmt.Sprintf("every path (%s) must lie under the node agents' --host-path-root, and a node agent run on each node that holds volumes", strings.Join(bases.all(), ", ")))
}

// sharedPaths are the directories of a shared file system local-path
// makes volumes in: the default one, and those of the StorageClasses of
// storageClassConfigs.
type sharedPaths struct {
	fallback string
	// classes maps each StorageClass listed to its path; nil without
	// storageClassConfigs.
	classes map[string]string
}

// planSharedFileSystem plans the takeover of local-path's
// sharedFileSystemPath, a file system every node mounts at the same path,
// by a hostPath backend the manager serves with sharedFileSystem: its
// volumes have no node affinity, as local-path's there have none, and the
// StorageClass parameters nodePath and nodeAffinityKey are ignored, as
// local-path ignores them there.
func (p *Plan) planSharedFileSystem(object, name string, shared sharedPaths, in *install, patterns []v1alpha1.LocalPathPattern) {
	all := []string{shared.fallback}
	for _, class := range slices.Sorted(maps.Keys(shared.classes)) {
		all = append(all, shared.classes[class])
	}
	for i, sharedPath := range all {
		if !path.IsAbs(sharedPath) || path.Clean(sharedPath) == "/" {
			p.refuse(object, "sharedFileSystemPath %q: provfleet serves absolute paths below / only", sharedPath)
			return
		}
		all[i] = path.Clean(sharedPath)
	}
	if why := apart(slices.Compact(slices.Sorted(slices.Values(all)))); why != "" {
		p.refuse(object, "the sharedFileSystemPaths of storageClassConfigs %s", why)
		return
	}
	for _, class := range in.classesOf(p.OldName) {
		if strings.EqualFold(class.Annotations["defaultVolumeType"], "local") {
			p.Notes = append(p.Notes, fmt.Sprintf("StorageClass %s asks for local volumes, which need node affinity that volumes of a shared file system lack: "+
				"local-path-provisioner failed its claims, and provfleet gives them hostPath volumes", class.Name))
		}
	}
	hp := &v1alpha1.HostPathBackend{
		Path:              v1alpha1.AbsolutePath(all[0]),
		SharedFileSystem:  true,
		VolumeType:        v1alpha1.HostPathVolumeHostPath,
		PathPattern:       localPathPattern,
		OnDelete:          v1alpha1.OnDeleteDelete,
		LocalPathPatterns: patterns,
	}
	var listed []string
	for i, class := range slices.Sorted(maps.Keys(shared.classes)) {
		listed = append(listed, class)
		hp.StorageClasses = append(hp.StorageClasses, v1alpha1.HostPathStorageClass{StorageClassName: class, Path: v1alpha1.AbsolutePath(all[i+1])})
	}
	p.newConfig(name, p.OldName, v1alpha1.BackendSpec{HostPath: hp})
	for _, pv := range in.volumesOf(p.OldName) {
		if shared.classes != nil && !slices.Contains(listed, pv.Spec.StorageClassName) {
			p.planUnlistedVolume(nil, pv)
			continue
		}
		p.planSharedVolume(all, pv, in.classes[pv.Spec.StorageClassName])
	}
	p.noteAdoptable()
	p.Notes = append(p.Notes, fmt.Sprintf("the manager makes and deletes the volumes of %s itself: mount that shared file system at the same path in its pod "+
		"(Helm values extraVolumes and extraVolumeMounts), under its --host-path-root (value hostPathRoot), as a user that may delete what pods write there",
		strings.Join(slices.Compact(slices.Sorted(slices.Values(all))), ", ")))
}

// planSharedVolume decides the fate of pv as local-path's Delete does for
// sharedFileSystemPath: its teardown script, rm -rf, on whichever node its
// helper pod runs. A volume pinned to a node is refused: local-path would
// delete its path there as if it were on the shared file system.
func (p *Plan) planSharedVolume(paths []string, pv *corev1.PersistentVolume, class *storagev1.StorageClass) {
	object := "PersistentVolume " + pv.Name
	if pv.Spec.NodeAffinity != nil {
		p.refuse(object, "it is pinned to a node, while local-path-provisioner with sharedFileSystemPath deletes a volume's path from whichever node its helper pod runs on; "+
			"provfleet's volumes of a shared file system are pinned to none: release it by hand")
		return
	}
	base, dir, err := volumeBase(paths, pv)
	if err != nil {
		p.refuse(object, "the manager, serving the shared file system %s, would not release it: %v", strings.Join(paths, ", "), err)
		return
	}
	want := map[string]string{backend.AnnOnDelete: string(backend.OnDeleteDelete), backend.AnnDeleteUnmarked: "true"}
	policy, what := backend.OnDeleteDelete, ""
	if recorded, ok := pv.Annotations[backend.AnnOnDelete]; ok {
		// An administrator's or an earlier run's decision stands.
		policy, what, want = backend.OnDeletePolicy(recorded), " (recorded already)", nil
	}
	what = fate(pv, policy, base, dir) + what + adoptable(pv, policy, class)
	p.Volumes = append(p.Volumes, Volume{PV: pv, Fate: "on the shared file system: " + what, Record: record(pv, want)})
}

// ignoreUnread drops from config what the old release does not read, as
// it ignored it, and notes so.
func (p *Plan) ignoreUnread(config *localPathConfig) {
	if config.SharedFileSystemPath != "" && !localPathSharedFS.in(p.Version) {
		p.Notes = append(p.Notes, fmt.Sprintf("sharedFileSystemPath is ignored, as this release ignored it: it came with %s", localPathSharedFS))
		config.SharedFileSystemPath = ""
	}
	if len(config.StorageClassConfigs) > 0 && !localPathClassConfigs.in(p.Version) {
		p.Notes = append(p.Notes, fmt.Sprintf("storageClassConfigs is ignored, as this release ignored it: it came with %s", localPathClassConfigs))
		config.StorageClassConfigs = nil
	}
}

// localPathProvisionerName returns the name local-path answers to: its
// --provisioner-name, else PROVISIONER_NAME, else its default. Its Helm
// chart passes cluster.local/<fullname>; its plain manifest passes none.
func localPathProvisionerName(in *install) string {
	if name, ok := argValue(in.container, "provisioner-name"); ok {
		return name
	}
	if name, err := envValue(in.container, envProvisionerName); err == nil && name != "" {
		return name
	}
	return localPathDefaultName
}

// readLocalPathConfigMap reads the ConfigMap local-path reads: its
// --configmap-name in its --namespace (else POD_NAMESPACE, its own).
func readLocalPathConfigMap(ctx context.Context, client kubernetes.Interface, in *install) (*corev1.ConfigMap, error) {
	name, ok := argValue(in.container, "configmap-name")
	if !ok {
		name = localPathDefaultConfigMap
	}
	namespace, ok := argValue(in.container, "namespace")
	if !ok {
		namespace = in.deployment.Namespace
	}
	configMap, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot read local-path-provisioner's ConfigMap %s/%s: %w", namespace, name, err)
	}
	return configMap, nil
}

// checkSetup reads the setup script into the class patterns the hostPath
// backend applies for it. It refuses a setupCommand, and a script other than
// local-path's stock one, mkdir -m 0777 -p "$VOL_DIR", optionally followed
// by the lines of its documentation that apply the patterns: provfleet makes
// the directory itself and runs no script, so what another does to a new
// directory is not kept.
func (p *Plan) checkSetup(object, command string, data map[string]string) []v1alpha1.LocalPathPattern {
	if command != "" {
		p.refuse(object, "setupCommand %q runs in place of the setup script; what it does to a new directory is unknown, and provfleet makes the directory itself and runs no command", command)
		return nil
	}
	script, ok := data[localPathSetupKey]
	if !ok {
		p.refuse(object, "it has no setup script: local-path-provisioner fails every new volume, which provfleet would make")
		return nil
	}
	steps := scriptSteps(script)
	if len(steps) == 0 || steps[0] != setupMkdir {
		p.refuse(object, "its setup script does not start with %s, and provfleet runs no script but makes the directory itself, mode 0777; "+
			"where that is all it does, make the script that line to say so", setupMkdir)
		return nil
	}
	var patterns []v1alpha1.LocalPathPattern
	for _, step := range steps[1:] {
		pattern, known := setupLines[step]
		if !known || slices.Contains(patterns, pattern) {
			p.refuse(object, "its setup script runs %q after %s: provfleet runs no script, and applies only the lines %s and %s, once each",
				step, setupMkdir, setupChown, setupChmod)
			return nil
		}
		patterns = append(patterns, pattern)
	}
	if len(patterns) > 0 && !localPathPermissions.in(p.Version) {
		p.refuse(object, "its setup script reads VOL_USER, VOL_GROUP or VOL_PERM, which only releases with %s set: "+
			"this one ran it with them unset; remove those lines to say what it did", localPathPermissions)
		return nil
	}
	return patterns
}

// notePatterns notes what the plan does with the patterns class sets, where
// it is not what an administrator might expect: a pattern no line of the
// setup script applies is ignored, as that script ignores it, and under
// the chown line a class with neither userPattern nor groupPattern has its
// claims refused, as BusyBox's chown ":" failed them.
func (p *Plan) notePatterns(class *storagev1.StorageClass, applied []v1alpha1.LocalPathPattern) {
	if !localPathPermissions.in(p.Version) {
		return
	}
	set := func(key string) bool {
		_, inParams := class.Parameters[key]
		_, inAnnotations := class.Annotations[key]
		return inParams || inAnnotations
	}
	owner := slices.Contains(applied, v1alpha1.LocalPathPatternOwner)
	var ignored []string
	for key, pattern := range map[string]v1alpha1.LocalPathPattern{
		"userPattern": v1alpha1.LocalPathPatternOwner, "groupPattern": v1alpha1.LocalPathPatternOwner, "permPattern": v1alpha1.LocalPathPatternMode,
	} {
		if set(key) && !slices.Contains(applied, pattern) {
			ignored = append(ignored, key)
		}
	}
	if len(ignored) > 0 {
		slices.Sort(ignored)
		p.Notes = append(p.Notes, fmt.Sprintf("StorageClass %s sets %s, which the setup script does not apply: ignored, as it was", class.Name, strings.Join(ignored, ", ")))
	}
	if owner && !set("userPattern") && !set("groupPattern") {
		p.Notes = append(p.Notes, fmt.Sprintf("StorageClass %s sets neither userPattern nor groupPattern: the setup script's chown \":\" failed its claims, "+
			"and provfleet refuses them with an Event likewise", class.Name))
	}
}

// scriptSteps returns the commands of a script: its lines without blank
// ones, comments and set options, each trimmed, with ${VOL_X} read as
// $VOL_X.
func scriptSteps(script string) []string {
	braces := strings.NewReplacer("${VOL_DIR}", "$VOL_DIR", "${VOL_USER}", "$VOL_USER", "${VOL_GROUP}", "$VOL_GROUP", "${VOL_PERM}", "$VOL_PERM")
	var steps []string
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "set -") {
			continue
		}
		steps = append(steps, braces.Replace(line))
	}
	return steps
}

// checkTeardown refuses a teardown other than the one every release
// ships, rm -rf "$VOL_DIR": provfleet deletes the directory itself and runs
// no script, so what another does to a released directory is not kept.
func (p *Plan) checkTeardown(object, command string, data map[string]string) {
	if command != "" {
		p.refuse(object, "teardownCommand %q runs in place of the teardown script; what it does to a released directory is unknown, and provfleet runs no command", command)
		return
	}
	script, ok := data[localPathTeardownKey]
	if !ok {
		p.refuse(object, "it has no teardown script: local-path-provisioner fails every delete and keeps the directory, which provfleet would delete")
		return
	}
	if !slices.Equal(scriptSteps(script), []string{`rm -rf "$VOL_DIR"`}) {
		p.refuse(object, "its teardown script does more or other than rm -rf \"$VOL_DIR\", and provfleet runs no script but deletes a released directory; "+
			"where deleting is all it does, make the script that line to say so")
	}
}

// nodeBases maps local-path's nodePathMap onto a hostPath backend: the
// paths of each node, the default ones for the nodes not listed; new
// volumes go in the first, as path, the others are additionalPaths.
type nodeBases struct {
	// fallback are the paths of the nodes not listed; none when only
	// listed nodes are served.
	fallback []string
	// nodes are the listed nodes, in the ConfigMap's order, and paths
	// their paths.
	nodes []string
	paths map[string][]string
}

// nodePaths reads nodePathMap, refusing what has no mapping; nil when
// nothing can be mapped.
func (p *Plan) nodePaths(object string, config localPathStorage) *nodeBases {
	refused := len(p.Refusals)
	switch {
	case config.SharedFileSystemPath != "":
		p.refuse(object, "it sets both nodePathMap and sharedFileSystemPath, with which local-path-provisioner fails every claim and every delete: "+
			"keep the one its volumes were made with")
	case len(config.NodePathMap) == 0:
		p.refuse(object, "nodePathMap names no node and no path, nor does sharedFileSystemPath")
	}
	bases := &nodeBases{paths: map[string][]string{}}
	for _, entry := range config.NodePathMap {
		if _, dup := bases.paths[entry.Node]; dup || (entry.Node == localPathDefaultNode && bases.fallback != nil) {
			p.refuse(object, "nodePathMap lists node %s twice, which local-path-provisioner refuses", entry.Node)
			continue
		}
		paths, why := entryPaths(entry.Paths)
		if why != "" {
			p.refuse(object, "nodePathMap gives node %s the paths %q: %s", entry.Node, entry.Paths, why)
			continue
		}
		if entry.Node == localPathDefaultNode {
			bases.fallback = paths
			continue
		}
		bases.nodes = append(bases.nodes, entry.Node)
		bases.paths[entry.Node] = paths
	}
	if len(p.Refusals) > refused {
		return nil
	}
	return bases
}

// entryPaths returns the paths of a nodePathMap entry, cleaned, or why they
// have no mapping.
func entryPaths(paths []string) ([]string, string) {
	switch {
	case len(paths) == 0:
		return nil, "provfleet serves at least one path per node"
	case len(paths) > maxNodePaths:
		return nil, fmt.Sprintf("provfleet serves at most %d paths per node", maxNodePaths)
	}
	var cleaned []string
	for _, p := range paths {
		if !path.IsAbs(p) || path.Clean(p) == "/" {
			return nil, "provfleet serves absolute paths below / only"
		}
		cleaned = append(cleaned, path.Clean(p))
	}
	return cleaned, apart(cleaned)
}

// of returns the paths of node.
func (b *nodeBases) of(node string) ([]string, bool) {
	if paths, ok := b.paths[node]; ok {
		return paths, true
	}
	return b.fallback, b.fallback != nil
}

// all returns every path, each once.
func (b *nodeBases) all() []string {
	all := slices.Clone(b.fallback)
	for _, node := range b.nodes {
		all = appendNew(all, b.paths[node])
	}
	return all
}

// hostPath returns the hostPath backend that serves these paths, with
// local-path's directory names and its release of a directory (deleted).
// Without a default path only the listed nodes are served, selected by
// their kubernetes.io/hostname.
func (b *nodeBases) hostPath(volumeType v1alpha1.HostPathVolumeType) *v1alpha1.HostPathBackend {
	hp := &v1alpha1.HostPathBackend{
		VolumeType:  volumeType,
		PathPattern: localPathPattern,
		OnDelete:    v1alpha1.OnDeleteDelete,
	}
	fallback := b.fallback
	if fallback == nil {
		fallback = b.paths[b.nodes[0]]
		hp.NodeSelector = &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{
			{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: b.nodes},
		}}
	}
	hp.Path, hp.AdditionalPaths = v1alpha1.SplitPaths(fallback)
	// Nodes of the same paths, in the same order, share an entry.
	byPaths := map[string]int{}
	for _, node := range b.nodes {
		paths := b.paths[node]
		if slices.Equal(paths, fallback) {
			continue
		}
		key := strings.Join(paths, "\n")
		i, ok := byPaths[key]
		if !ok {
			i = len(hp.NodePaths)
			byPaths[key] = i
			entry := v1alpha1.NodePath{}
			entry.Path, entry.AdditionalPaths = v1alpha1.SplitPaths(paths)
			hp.NodePaths = append(hp.NodePaths, entry)
		}
		hp.NodePaths[i].Nodes = append(hp.NodePaths[i].Nodes, node)
	}
	return hp
}

// nodeAffinityKey returns the node label local-path's classes pin new
// volumes with, for hostPath.nodeAffinityKey: that of the classes that set
// one, where the release reads it, "" for the host name. One backend pins
// by one label, so classes that pin by different ones are refused, the
// host name included: a class that sets none, pinned by another key, could
// have its pods sent to another node of the same label value, where its
// directory is not.
func (p *Plan) nodeAffinityKey(classes []*storagev1.StorageClass) string {
	if !localPathNodeAffinityKey.in(p.Version) {
		return ""
	}
	byKey := map[string][]string{}
	var none []string
	for _, class := range classes {
		if key := class.Parameters["nodeAffinityKey"]; key != "" && key != corev1.LabelHostname {
			byKey[key] = append(byKey[key], class.Name)
		} else {
			none = append(none, class.Name)
		}
	}
	keys := slices.Sorted(maps.Keys(byKey))
	switch {
	case len(keys) == 0:
		return ""
	case len(keys) == 1 && len(none) == 0:
		return keys[0]
	}
	var each []string
	for _, key := range keys {
		each = append(each, fmt.Sprintf("%s by StorageClasses %s", key, strings.Join(byKey[key], ", ")))
	}
	if len(none) > 0 {
		each = append(each, fmt.Sprintf("%s by StorageClasses %s, which set none", corev1.LabelHostname, strings.Join(none, ", ")))
	}
	p.refuse("StorageClasses of "+p.OldName, "%s pins new volumes by several node labels (%s); a ProvisionerConfig pins by one, its hostPath.nodeAffinityKey, "+
		"and pinned by another label a volume could be used on another node than its directory's", localPathNodeAffinityKey, strings.Join(each, "; "))
	return ""
}

// volumeType returns the kind of volume local-path's classes make:
// hostPath unless each says local with its defaultVolumeType annotation.
// Classes that differ are refused, since one backend makes one kind.
func (p *Plan) volumeType(classes []*storagev1.StorageClass) v1alpha1.HostPathVolumeType {
	var local, hostPath []string
	for _, class := range classes {
		if strings.EqualFold(class.Annotations["defaultVolumeType"], "local") {
			local = append(local, class.Name)
		} else {
			hostPath = append(hostPath, class.Name)
		}
	}
	switch {
	case len(local) == 0:
		return v1alpha1.HostPathVolumeHostPath
	case len(hostPath) == 0:
		return v1alpha1.HostPathVolumeLocal
	}
	p.refuse("StorageClasses "+strings.Join(local, ", "), "defaultVolumeType local, where %s make hostPath volumes: a ProvisionerConfig makes one kind; no mapping yet", strings.Join(hostPath, ", "))
	return v1alpha1.HostPathVolumeHostPath
}

// planLocalPathVolume decides the fate of pv as local-path's Delete does:
// its teardown script, rm -rf, for any volume that reaches it. The node is
// the one local-path recorded, else the one its node affinity pins it to;
// it is recorded for the node agent, which finds a volume's node by
// hostpath.provfleet.io/node or kubernetes.io/hostname only.
func (p *Plan) planLocalPathVolume(bases *nodeBases, pv *corev1.PersistentVolume, class *storagev1.StorageClass) {
	object := "PersistentVolume " + pv.Name
	if pv.Spec.NodeAffinity == nil {
		p.refuse(object, "it has no node affinity, a volume of sharedFileSystemPath, while the ConfigMap names nodePathMap: "+
			"local-path-provisioner fails its delete, as it finds no node")
		return
	}
	node := localPathNode(pv)
	if node == "" {
		p.refuse(object, "it records no node (%s, from local-path-provisioner v0.0.25) and its node affinity pins it to no one node by %s", localPathAnnSelectedNode, corev1.LabelHostname)
		return
	}
	paths, ok := bases.of(node)
	if !ok {
		p.refuse(object, "its node %s has no path in nodePathMap", node)
		return
	}
	base, dir, err := volumeBase(paths, pv)
	if err != nil {
		p.refuse(object, "the node agent of %s, serving %s, would not release it: %v", node, strings.Join(paths, ", "), err)
		return
	}
	want := map[string]string{backend.AnnOnDelete: string(backend.OnDeleteDelete), backend.AnnDeleteUnmarked: "true", backend.AnnNode: node}
	policy, what := backend.OnDeleteDelete, ""
	if recorded, ok := pv.Annotations[backend.AnnOnDelete]; ok {
		// An administrator's or an earlier run's decision stands.
		policy, what = backend.OnDeletePolicy(recorded), " (recorded already)"
		delete(want, backend.AnnOnDelete)
		delete(want, backend.AnnDeleteUnmarked)
	}
	what = fate(pv, policy, base, dir) + what + adoptable(pv, policy, class)
	p.Volumes = append(p.Volumes, Volume{PV: pv, Fate: "on node " + node + ": " + what, Record: record(pv, want)})
}

// volumeBase returns which of paths holds the directory of pv, and that
// directory below it; the error is that of the first path.
func volumeBase(paths []string, pv *corev1.PersistentVolume) (string, string, error) {
	var first error
	for _, base := range paths {
		dir, err := hostpath.VolumeDir(base, pv)
		if err == nil {
			return base, dir, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", "", first
}

// localPathNode returns the node of pv: hostpath.provfleet.io/node where
// set, else the node local-path recorded, else the one its affinity pins
// it to by kubernetes.io/hostname.
func localPathNode(pv *corev1.PersistentVolume) string {
	if node, ok := pv.Annotations[backend.AnnNode]; ok {
		return node
	}
	if node := pv.Annotations[localPathAnnSelectedNode]; node != "" {
		return node
	}
	return backend.VolumeNode(pv)
}

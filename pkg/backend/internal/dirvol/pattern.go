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

package dirvol

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

const (
	// maxPatternLen bounds the template text an admin may write.
	maxPatternLen = 1024
	// maxDirLen bounds a rendered directory; rendering stops as soon as it is
	// exceeded, so a template cannot produce huge output.
	maxDirLen = 1024
	// maxComponentLen leaves room for the archive and marker names built from a
	// component within the usual 255-byte name limit.
	maxComponentLen = 200
	// maxDepth bounds how many folders one rendered directory may nest.
	maxDepth = 16
	// pathPatternName names path patterns in errors.
	pathPatternName = "path pattern"
	// archivePrefix starts the names of archived directories; rendered
	// directories may not use it so a claim cannot pre-empt an archive name.
	archivePrefix = "archived-"
)

// allowedFuncs are the template functions whose output is bounded by their
// input. printf, print, html, js, urlquery, slice and call are left out: they
// can pad or multiply their input and so let a short pattern produce
// unbounded output before anything is written.
var allowedFuncs = map[string]bool{
	"and": true, "or": true, "not": true, "index": true, "len": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
}

// Pattern is a parsed path pattern.
type Pattern struct {
	tmpl *template.Template
	// subdir, set for a pattern in nfs-subdir-external-provisioner's
	// syntax, makes Render drop empty components, as that provisioner's
	// path join does, and render fallback where nothing is left; without a
	// fallback, nothing left is an error.
	subdir   bool
	fallback *Pattern
}

// claimData is all a pattern can see of a claim; nothing else is reachable.
type claimData struct {
	Namespace   string
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

type patternData struct {
	PVC    claimData
	PVName string
}

// ParsePattern parses a path pattern: a Go text/template over .PVC (Namespace,
// Name, Labels, Annotations) and .PVName. Only actions whose cost is bounded by
// the claim's size are allowed: no range, template, define, block or variables.
// An empty text means the PV name.
func ParsePattern(text string) (*Pattern, error) {
	if text == "" {
		text = "{{.PVName}}"
	}
	if len(text) > maxPatternLen {
		return nil, fmt.Errorf("path pattern is %d bytes long, more than %d", len(text), maxPatternLen)
	}
	p, err := parseTemplate(pathPatternName, text)
	if err != nil {
		return nil, err
	}
	if err := checkFixedText(p.tmpl.Root); err != nil {
		return nil, fmt.Errorf("path pattern %q: %w", truncate(text), err)
	}
	return p, nil
}

// checkFixedText refuses a pattern whose fixed text makes every claim's
// directory one that CheckDir refuses: a ".." or a leading "/" spelt in a
// way the CRD's rules, which read the pattern as written, cannot see, such as
// {{".."}} or text joined across a comment. Text next to an action that
// renders the claim may change meaning, so only runs of fixed text count.
func checkFixedText(root *parse.ListNode) error {
	var run strings.Builder
	first := true
	for _, node := range root.Nodes {
		if text, fixed := fixedText(node); fixed {
			run.WriteString(text)
			continue
		}
		if err := checkFixedRun(run.String(), first); err != nil {
			return err
		}
		run.Reset()
		first = false
	}
	return checkFixedRun(run.String(), first)
}

// checkFixedRun checks one run of fixed text; first says whether the run
// starts the directory.
func checkFixedRun(run string, first bool) error {
	switch {
	case strings.Contains(run, ".."):
		return fmt.Errorf("its fixed text %q renders \"..\" for every claim", truncate(run))
	case first && strings.HasPrefix(run, "/"):
		return fmt.Errorf("its fixed text %q renders an absolute path for every claim", truncate(run))
	}
	return nil
}

// fixedText returns what node renders whatever the claim, if that is fixed:
// text, a comment, or an action that is a string constant.
func fixedText(node parse.Node) (string, bool) {
	switch n := node.(type) {
	case *parse.TextNode:
		return string(n.Text), true
	case *parse.CommentNode:
		return "", true
	case *parse.ActionNode:
		if len(n.Pipe.Decl) != 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
			return "", false
		}
		if s, ok := n.Pipe.Cmds[0].Args[0].(*parse.StringNode); ok {
			return s.Text, true
		}
	}
	return "", false
}

// parseTemplate is ParsePattern for a text of any length: one translated
// from a checked pattern, or one that renders a value rather than a path.
// what names the pattern in errors.
func parseTemplate(what, text string) (*Pattern, error) {
	tmpl, err := template.New(what).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", what, err)
	}
	if n := len(tmpl.Templates()); n != 1 {
		return nil, fmt.Errorf("%s may not define templates", what)
	}
	if err := checkNode(tmpl.Root); err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, text, err)
	}
	return &Pattern{tmpl: tmpl}, nil
}

// checkNode walks a parsed template and refuses every construct whose cost is
// not bounded by the size of its input.
func checkNode(node parse.Node) error {
	switch n := node.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		return checkNodes(n.Nodes)
	case *parse.TextNode, *parse.CommentNode, *parse.FieldNode, *parse.DotNode,
		*parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
		return nil
	case *parse.VariableNode:
		// Only $, the data itself, exists: declarations are refused below.
		return nil
	case *parse.ActionNode:
		return checkNode(n.Pipe)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.PipeNode:
		return checkPipe(n)
	case *parse.CommandNode:
		return checkNodes(n.Args)
	case *parse.ChainNode:
		return checkNode(n.Node)
	case *parse.IdentifierNode:
		if !allowedFuncs[n.Ident] {
			return fmt.Errorf("function %q is not allowed", n.Ident)
		}
		return nil
	default:
		return fmt.Errorf("%q is not allowed", node.String())
	}
}

// checkNodes is checkNode for each of nodes, in order.
func checkNodes(nodes []parse.Node) error {
	for _, node := range nodes {
		if err := checkNode(node); err != nil {
			return err
		}
	}
	return nil
}

// checkPipe is checkNode for a pipeline, which may declare no variable.
func checkPipe(n *parse.PipeNode) error {
	if n == nil {
		return nil
	}
	if len(n.Decl) > 0 {
		return errors.New("variables are not allowed")
	}
	for _, cmd := range n.Cmds {
		if err := checkNode(cmd); err != nil {
			return err
		}
	}
	return nil
}

func checkBranch(n *parse.BranchNode) error {
	for _, child := range []parse.Node{n.Pipe, n.List, n.ElseList} {
		if err := checkNode(child); err != nil {
			return err
		}
	}
	return nil
}

// Render renders the pattern for a claim and checks the result with CheckDir.
func (p *Pattern) Render(pvName string, claim *corev1.PersistentVolumeClaim) (string, error) {
	dir, err := p.execute(pvName, claim, maxDirLen)
	if err != nil {
		return "", fmt.Errorf("cannot render path pattern: %w", err)
	}
	if p.subdir {
		dir = strings.Join(slices.DeleteFunc(strings.Split(dir, "/"), func(c string) bool { return c == "" }), "/")
		if dir == "" && p.fallback != nil {
			return p.fallback.Render(pvName, claim)
		}
		if dir == "" {
			return "", errSubdirEmpty
		}
	}
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("rendered path %q refused: %w", truncate(dir), err)
	}
	return dir, nil
}

// execute renders the pattern for a claim into at most limit bytes.
func (p *Pattern) execute(pvName string, claim *corev1.PersistentVolumeClaim, limit int) (string, error) {
	data := patternData{
		PVName: pvName,
		PVC: claimData{
			Namespace:   claim.Namespace,
			Name:        claim.Name,
			Labels:      claim.Labels,
			Annotations: claim.Annotations,
		},
	}
	out := &limitedBuffer{limit: limit}
	if err := p.tmpl.Execute(out, data); err != nil {
		return "", err
	}
	return out.String(), nil
}

// CheckDir refuses a directory, relative to a backend's base, that is not a
// plain descending path of printable names.
func CheckDir(dir string) error {
	switch {
	case dir == "":
		return errors.New("path is empty")
	case len(dir) > maxDirLen:
		return fmt.Errorf("path is longer than %d bytes", maxDirLen)
	case !utf8.ValidString(dir):
		return errors.New("path is not valid UTF-8")
	case strings.HasPrefix(dir, "/"):
		return errors.New("path is absolute")
	case strings.Contains(dir, ".."):
		return errors.New("path contains \"..\"")
	case strings.Contains(dir, `\`):
		return errors.New("path contains a backslash")
	}
	for _, r := range dir {
		if r != ' ' && !unicode.IsPrint(r) {
			return fmt.Errorf("path contains the control or non-printable character %U", r)
		}
	}
	components := strings.Split(dir, "/")
	if len(components) > maxDepth {
		return fmt.Errorf("path has more than %d components", maxDepth)
	}
	for _, c := range components {
		switch {
		case c == "":
			return errors.New("path has an empty component")
		case strings.TrimSpace(c) != c:
			return fmt.Errorf("component %q begins or ends with a space", c)
		case strings.HasPrefix(c, "."):
			// Hidden names are kept for ownership markers and for server
			// features such as an NFS filer's .snapshot folder.
			return fmt.Errorf("component %q begins with a dot", c)
		case strings.HasPrefix(c, archivePrefix):
			return fmt.Errorf("component %q begins with the reserved prefix %q", c, archivePrefix)
		case len(c) > maxComponentLen:
			return fmt.Errorf("component is longer than %d bytes", maxComponentLen)
		}
	}
	return nil
}

// truncate keeps error messages, which end up in Events, short.
func truncate(s string) string {
	const maxLen = 128
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "..."
}

// limitedBuffer fails the template as soon as the output is longer than
// limit.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, fmt.Errorf("rendered text is longer than %d bytes", b.limit)
	}
	return b.Buffer.Write(p)
}

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

package harness

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// sizeClass is a share of a clone tree's bytes in files of min to max
// bytes.
type sizeClass struct {
	min, max int64
	share    float64
}

// cloneSizes are the files of scenario 11's tree: many small ones, some
// of a few MiB, a few large ones. A class whose share is smaller than its
// files gets one file of its share (a toy tree).
var cloneSizes = []sizeClass{
	{min: 1 << 10, max: 64 << 10, share: 0.25},
	{min: 1 << 20, max: 8 << 20, share: 0.35},
	{min: 64 << 20, max: 256 << 20, share: 0.40},
}

// cloneDirs are the directories the tree's files are spread over, a few
// levels deep.
func cloneDirs() []string {
	dirs := []string{"."}
	for i := range 4 {
		top := "d" + strconv.Itoa(i)
		dirs = append(dirs, top)
		for j := range 4 {
			sub := filepath.Join(top, "e"+strconv.Itoa(j))
			dirs = append(dirs, sub, filepath.Join(sub, "f"))
		}
	}
	return dirs
}

// treeStats are what a built tree holds.
type treeStats struct {
	bytes                 int64
	files, dirs, symlinks int
}

// buildCloneTree writes a tree of about total bytes of incompressible data
// into dir, the same for the same total: files of cloneSizes spread over
// cloneDirs, and beside every tenth file a symlink to it, besides one that
// climbs out of its directory and one that dangles.
func buildCloneTree(dir string, total int64) (treeStats, error) {
	r := rand.New(rand.NewPCG(11, uint64(total))) //nolint:gosec // reproducible data, no secret
	data := rand.NewChaCha8([32]byte{11})
	dirs := cloneDirs()
	st := treeStats{dirs: len(dirs) - 1}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return st, fmt.Errorf("cannot make the tree's directory %s: %w", d, err)
		}
	}
	for _, class := range cloneSizes {
		budget := int64(float64(total) * class.share)
		for budget > 0 {
			size := min(class.min+r.Int64N(class.max-class.min+1), budget)
			budget -= size
			name := filepath.Join(dirs[r.IntN(len(dirs))], "file-"+strconv.Itoa(st.files))
			if err := writeRandomFile(filepath.Join(dir, name), data, size); err != nil {
				return st, err
			}
			if st.files%10 == 0 {
				link := filepath.Join(dir, filepath.Dir(name), "link-"+strconv.Itoa(st.files))
				if err := os.Symlink(filepath.Base(name), link); err != nil {
					return st, fmt.Errorf("cannot make a symlink of the tree: %w", err)
				}
				st.symlinks++
			}
			st.files++
			st.bytes += size
		}
	}
	for name, target := range map[string]string{"d0/e0/f/up": "../../../d1", "d2/dangling": "no-such-file"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return st, fmt.Errorf("cannot make a symlink of the tree: %w", err)
		}
		st.symlinks++
	}
	return st, nil
}

func writeRandomFile(name string, data io.Reader, size int64) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("cannot create a file of the tree: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, err = io.CopyN(w, data, size)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	return nil
}

// treeDigest tells each entry under dir: its type and permission bits, and
// a file's size and SHA-256 or a link's target, so two trees compare.
func treeDigest(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link " + target
			return err
		case d.Type().IsRegular():
			sum, err := fileSum(p)
			out[rel] = fmt.Sprintf("%s %d %s", info.Mode(), info.Size(), sum)
			return err
		}
		out[rel] = info.Mode().String()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the tree %s: %w", dir, err)
	}
	return out, nil
}

func fileSum(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moveEntries renames every entry of from into to, both on one file
// system: the tree moves between volumes without a copy.
func moveEntries(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", from, err)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return fmt.Errorf("cannot move the tree: %w", err)
		}
	}
	return nil
}

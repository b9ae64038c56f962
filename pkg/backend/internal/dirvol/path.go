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
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// RelDir returns where volumePath, a path recorded in a PersistentVolume, lies
// below base, both absolute slash-separated paths. It refuses a path outside
// base, base itself, and anything CheckDir refuses, so a PersistentVolume can
// never point an operation elsewhere.
func RelDir(base, volumePath string) (string, error) {
	if !path.IsAbs(volumePath) {
		return "", fmt.Errorf("volume path %q is not absolute", volumePath)
	}
	prefix := strings.TrimSuffix(path.Clean(base), "/") + "/"
	dir, ok := strings.CutPrefix(path.Clean(volumePath), prefix)
	if !ok {
		return "", fmt.Errorf("volume path %q is not below %q", volumePath, base)
	}
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("volume path %q refused: %w", volumePath, err)
	}
	return dir, nil
}

// CheckName refuses, with an error wrapping fs.ErrInvalid, what is not one
// component of a path, as every name a Dir takes must be: a file system
// would walk it, following symlinks on the way.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%q is not a name in a directory: %w", name, fs.ErrInvalid)
	}
	return nil
}

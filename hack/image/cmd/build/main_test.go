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

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		epoch   string
		want    string // tag, GOARCHes, output folder and creation time
		wantErr string
	}{
		"defaults": {
			args: []string{"-repo", "/src", "-archs", "arm64,amd64,arm64"},
			want: "provfleet/manager:dev [amd64 arm64] /src/_output/image 1970-01-01T00:00:00Z",
		},
		"everything named": {
			args:  []string{"-repo", "/src", "-out", "/out", "-archs", "amd64", "-repository", "example.com/pf", "-version", "v1.2.3"},
			epoch: "1700000000",
			want:  "example.com/pf:v1.2.3 [amd64] /out 2023-11-14T22:13:20Z",
		},
		"no repository":          {args: []string{}, wantErr: "-repo is required"},
		"an empty GOARCH":        {args: []string{"-repo", "/src", "-archs", "amd64,"}, wantErr: "list of GOARCHes"},
		"a platform, not GOARCH": {args: []string{"-repo", "/src", "-archs", "linux/amd64"}, wantErr: "list of GOARCHes"},
		"a version no tag takes": {args: []string{"-repo", "/src", "-version", "v1+dirty"}, wantErr: "cannot make an image tag"},
		"a date for an epoch":    {args: []string{"-repo", "/src"}, epoch: "2026-12-01", wantErr: "SOURCE_DATE_EPOCH"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := parse(tc.args, tc.epoch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join([]string{cfg.tag.String(), "[" + strings.Join(cfg.archs, " ") + "]", cfg.out, cfg.spec.Created.Format(time.RFC3339)}, " ")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsed (-want +got):\n%s", diff)
			}
		})
	}
}

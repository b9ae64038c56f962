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

package monitoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	tests := map[string]struct {
		expr string
		want []string
	}{
		"a selector": {expr: `up`, want: []string{"up"}},
		"label matchers": {
			expr: `provisioner_backend_up{provisioner=~"$provisioner", instance!="a}b"} == 0`,
			want: []string{"provisioner_backend_up"},
		},
		"a function and a range": {
			expr: `rate(workqueue_adds_total[$__rate_interval])`,
			want: []string{"workqueue_adds_total"},
		},
		"aggregation with the labels after": {
			expr: `sum(rate(a_total[5m])) by (provisioner, class)`,
			want: []string{"a_total"},
		},
		"aggregation with the labels before": {
			expr: `histogram_quantile(0.99, sum by (le, provisioner) (rate(x_seconds_bucket[1h:5m] offset 1d)))`,
			want: []string{"x_seconds_bucket"},
		},
		"binary operators and matching": {
			expr: `used / on (provisioner) group_left (instance) limit > 0.9 and bool other or vector(1e-3)`,
			want: []string{"used", "limit", "other"},
		},
		"a Grafana variable in braces": {expr: `a[${__range}] * 2`, want: []string{"a"}},
		"a comment":                    {expr: "a # b\n+ c", want: []string{"a", "c"}},
		"aggregation without": {
			expr: `count(b) without (x)`,
			want: []string{"b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
				t.Errorf("metricNames(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

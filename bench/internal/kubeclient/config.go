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

package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config loads kubeconfig and sets the client's rate limit, qps requests a
// second with bursts of burst, and its user agent, by which the
// apiserver's figures tell the programs apart.
func Config(kubeconfig string, qps float64, burst int, userAgent string) (*rest.Config, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cannot load the client configuration: %w", err)
	}
	config.QPS, config.Burst = float32(qps), burst
	config.UserAgent = userAgent
	return config, nil
}

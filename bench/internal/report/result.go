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

package report

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Systems a measurement can be of.
const (
	SystemProvfleet = "provfleet"
	SystemUpstream  = "upstream"
	SystemLimit     = "limit"
)

// Result is one line of latest.jsonl; its fields are the file's contract.
type Result struct {
	Scenario string  `json:"scenario"`
	System   string  `json:"system"`
	Tenants  int     `json:"tenants"`
	Claims   int     `json:"claims"`
	Seconds  float64 `json:"seconds"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	RSSMiB   float64 `json:"rss_mib"`
	CPUS     float64 `json:"cpu_s"`
	Watches  int     `json:"watches"`
	APIRPS   float64 `json:"api_rps"`
	Replicas int     `json:"replicas"`
	// RequestsPerClaim is what the system sent itself per claim of the
	// phase, Events and Leases included; 0: not measured.
	RequestsPerClaim float64 `json:"requests_per_claim,omitempty"`
	// Date is when the run that measured the row started (RFC 3339, UTC),
	// Commit the commit it ran (git describe: a -dirty suffix for changes
	// not committed); Unknown where no record says.
	Date   string `json:"date"`
	Commit string `json:"commit"`
	// ChargedMiB is what the kernel charges for the processes' memory (see
	// ChargedBy), summed; idle and memory scenarios only. Both are left out
	// of a line where not measured.
	ChargedMiB float64 `json:"charged_mib,omitempty"`
	// ChargedBy says where ChargedMiB comes from: "pss", "memory.current"
	// or "memory.usage_in_bytes" (of a cgroup holding the process alone),
	// joined with "+" where the processes summed differ.
	ChargedBy string `json:"charged_by,omitempty"`
}

// Unknown is the date or commit of a row that no record dates.
const Unknown = "unknown"

// chargedBy are the values of Result.ChargedBy, as the benchmark's measure
// package names them.
var chargedBy = []string{"pss", "memory.current", "memory.usage_in_bytes"}

// Validate reports what makes r malformed.
func (r Result) Validate() error {
	var errs []error
	if r.Scenario == "" {
		errs = append(errs, errors.New("no scenario"))
	}
	if !slices.Contains([]string{SystemProvfleet, SystemUpstream, SystemLimit}, r.System) {
		errs = append(errs, fmt.Errorf("system %q is not one of provfleet, upstream, limit", r.System))
	}
	if r.Tenants < 0 || r.Claims < 0 || r.Watches < 0 || r.Replicas < 0 {
		errs = append(errs, errors.New("a negative count"))
	}
	if r.Date == "" || r.Commit == "" {
		errs = append(errs, errors.New("no date or no commit"))
	}
	for name, v := range map[string]float64{
		"seconds": r.Seconds, "p50_ms": r.P50MS, "p99_ms": r.P99MS,
		"rss_mib": r.RSSMiB, "cpu_s": r.CPUS, "api_rps": r.APIRPS,
		"requests_per_claim": r.RequestsPerClaim, "charged_mib": r.ChargedMiB,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, fmt.Errorf("%s is %v", name, v))
		}
	}
	if (r.ChargedMiB > 0) != knownCharge(r.ChargedBy) {
		errs = append(errs, fmt.Errorf("charged_mib %v by %q: want a figure with one of %v, or neither", r.ChargedMiB, r.ChargedBy, chargedBy))
	}
	if r.P99MS < r.P50MS {
		errs = append(errs, fmt.Errorf("p99_ms %v below p50_ms %v", r.P99MS, r.P50MS))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("scenario %q system %q: %w", r.Scenario, r.System, err)
	}
	return nil
}

// knownCharge reports whether by names one or more of chargedBy, joined
// with "+".
func knownCharge(by string) bool {
	for _, source := range strings.Split(by, "+") {
		if !slices.Contains(chargedBy, source) {
			return false
		}
	}
	return true
}

// WriteJSONL writes one JSON object per result.
func WriteJSONL(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("cannot encode a result: %w", err)
		}
	}
	return nil
}

// jsonlFields are the keys every line must have; optionalFields those it
// may have besides.
var (
	jsonlFields    = []string{"scenario", "system", "tenants", "claims", "seconds", "p50_ms", "p99_ms", "rss_mib", "cpu_s", "watches", "api_rps", "replicas", "date", "commit"}
	optionalFields = []string{"requests_per_claim", "charged_mib", "charged_by"}
	// undatedFields are those of the lines written before rows carried
	// their date and commit.
	undatedFields = jsonlFields[:len(jsonlFields)-2]
)

// ReadJSONL reads and validates latest.jsonl: every line has exactly the
// contract's fields, with values of the right types and ranges.
func ReadJSONL(r io.Reader) ([]Result, error) {
	return readJSONL(r, jsonlFields)
}

// readJSONL reads lines that have every field of required and otherwise only
// fields of the contract; a row without a date or commit gets Unknown.
func readJSONL(r io.Reader, required []string) ([]Result, error) {
	var results []Result
	s := bufio.NewScanner(r)
	for line := 1; s.Scan(); line++ {
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		res, err := parseLine(s.Bytes(), required)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		results = append(results, res)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("cannot read results: %w", err)
	}
	return results, nil
}

func parseLine(line []byte, required []string) (Result, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return Result{}, fmt.Errorf("cannot parse: %w", err)
	}
	for _, k := range required {
		if _, ok := keys[k]; !ok {
			return Result{}, fmt.Errorf("no field %q", k)
		}
	}
	for k := range keys {
		if !slices.Contains(jsonlFields, k) && !slices.Contains(optionalFields, k) {
			return Result{}, fmt.Errorf("field %q is not one of %v or %v", k, jsonlFields, optionalFields)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var res Result
	if err := dec.Decode(&res); err != nil {
		return Result{}, err
	}
	res.Date, res.Commit = cmp.Or(res.Date, Unknown), cmp.Or(res.Commit, Unknown)
	return res, res.Validate()
}

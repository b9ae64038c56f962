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
	"slices"
	"strings"
)

// metricNames returns the metric names a PromQL expression selects. It is a
// tokenizer, not a parser: the Prometheus parser is a module whose
// requirements would move the manager's own (OpenTelemetry, gRPC, x/net),
// and the names are all this test needs. It skips
//   - strings, label matchers {...}, ranges and subqueries [...], comments,
//     and Grafana variables ($name, ${name});
//   - numbers and durations;
//   - identifiers followed by "(": function calls (rate, histogram_quantile,
//     vector, ...);
//   - the keywords, operators and aggregations of PromQL, and the label
//     lists after by, without, on, ignoring, group_left and group_right.
//
// Every other identifier is a metric name.
func metricNames(expr string) []string {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipGroup(expr, i, '{', '}')
		case c == '[':
			i = skipGroup(expr, i, '[', ']')
		case c == '#':
			i = skipWhile(expr, i, func(b byte) bool { return b != '\n' })
		case c == '$':
			i = skipVariable(expr, i+1)
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			i = skipWhile(expr, i, func(b byte) bool { return isIdent(b) || b == '.' })
		case isIdentStart(c):
			end := skipWhile(expr, i, isIdent)
			word, next := expr[i:end], skipWhile(expr, end, isSpace)
			i = end
			switch {
			case slices.Contains(labelListKeywords, word):
				if next < len(expr) && expr[next] == '(' {
					i = skipGroup(expr, next, '(', ')')
				}
			case slices.Contains(keywords, strings.ToLower(word)):
			case next < len(expr) && expr[next] == '(':
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names
}

// labelListKeywords are followed by a list of label names.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// keywords are PromQL's words that name no metric: set operators, bool,
// offset, the special numbers and the aggregations, which may stand
// before "by (...)" rather than "(".
var keywords = []string{
	"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// skipString returns the index after the string that starts at i.
func skipString(s string, i int) int {
	quote := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && quote != '`':
			j++
		case s[j] == quote:
			return j + 1
		}
	}
	return len(s)
}

// skipGroup returns the index after the group opened at i, with the
// strings and nested groups inside it.
func skipGroup(s string, i int, open, closing byte) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"', '\'', '`':
			i = skipString(s, i)
			continue
		case open:
			depth++
		case closing:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(s)
}

// skipVariable returns the index after a Grafana variable whose "$" is
// before i.
func skipVariable(s string, i int) int {
	if i < len(s) && s[i] == '{' {
		return skipGroup(s, i, '{', '}')
	}
	return skipWhile(s, i, isIdent)
}

func skipWhile(s string, i int, ok func(byte) bool) int {
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
func isIdentStart(b byte) bool {
	return b == '_' || b == ':' || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}
func isIdent(b byte) bool { return isIdentStart(b) || isDigit(b) }

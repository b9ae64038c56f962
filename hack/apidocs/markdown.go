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
)

// proseEscaper keeps text from turning into markup: HTML tags such as
// custom/<driver>, emphasis, links, code and table cell ends.
var proseEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `[`, `\[`, `]`, `\]`,
	`~`, `\~`, `|`, `\|`, `<`, `&lt;`, `>`, `&gt;`, `&`, `&amp;`,
)

// prose renders text for a table cell or a paragraph: its paragraphs kept
// apart, the lines within one joined, markup escaped.
func prose(text string) string {
	var paragraphs []string
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paragraphs = append(paragraphs, proseEscaper.Replace(p))
		}
	}
	return strings.Join(paragraphs, "<br><br>")
}

// code renders text as a code span in a table cell, where a pipe ends the
// cell even inside a code span unless escaped.
func code(text string) string {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\n", " "), "|", `\|`)
	fence := "`"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	if strings.HasPrefix(text, "`") || strings.HasSuffix(text, "`") {
		text = " " + text + " "
	}
	return fence + text + fence
}

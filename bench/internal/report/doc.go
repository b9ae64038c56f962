// Package report holds the benchmark's measurements and writes them as
// latest.jsonl (one JSON object per measurement, the fields other tools read)
// and as a Markdown table a person reads, with the ratios the targets are
// stated in.
package report

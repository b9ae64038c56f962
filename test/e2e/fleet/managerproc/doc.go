// Package managerproc runs the manager binary (cmd/manager) as a child process
// against a framework control plane: the end-to-end tests of the fleet use it
// where process death matters, and `make run` uses it for the local demo.
package managerproc

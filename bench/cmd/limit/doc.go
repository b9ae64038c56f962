// Command limit is the benchmark's physical limit: it only creates (or
// deletes) PersistentVolumes as fast as the apiserver accepts them, with the
// same client QPS and burst as the provisioners, and does nothing else.
package main

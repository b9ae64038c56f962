// Package dirvol is the directory logic the hostpath and nfs backends share: it
// renders a claim's path pattern, refuses hostile results, reserves capacity,
// and creates, archives and removes volume directories through os.Root so no
// operation can leave the base directory, symlinks included.
package dirvol

// Package dirvol is the directory logic the hostpath and nfs backends share: it
// renders a claim's path pattern, refuses hostile results, reserves capacity,
// and creates, archives and removes volume directories through os.Root so no
// operation can leave the base directory, symlinks included. Beside each
// directory a hidden owner marker names its PersistentVolume; before making a
// directory it writes a record of it in the hidden folder .provfleet-unsaved
// at the top of the base, kept until it is told that the PersistentVolume
// exists or the directory is removed, so a directory whose PersistentVolume
// was never created can be found and deleted.
package dirvol

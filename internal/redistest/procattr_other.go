//go:build !linux

package redistest

import "syscall"

// sysProcAttr puts the server in its own process group so Kill reaches it and
// its children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

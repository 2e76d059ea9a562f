package redistest

import "syscall"

// sysProcAttr puts the server in its own process group (so Kill reaches it and
// its children) and asks Linux to kill it if the test binary dies without
// running its cleanups (a -timeout panic, Ctrl-C). Pdeathsig fires when the
// starting OS thread exits, which Go does only for goroutines that exit while
// locked to their thread; nothing here does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

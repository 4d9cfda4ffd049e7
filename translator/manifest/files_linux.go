package manifest

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openForWriting tells whether another process has f open for writing: the
// kernel refuses a read lease on such a file (fcntl(2) F_SETLEASE). When a
// lease cannot be taken for another reason (a file we do not own without
// CAP_LEASE, a file system without leases), it says no: the size and time
// checks of readComplete remain.
func openForWriting(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	writing := false
	_ = rc.Control(func(fd uintptr) {
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETLEASE, syscall.F_RDLCK)
		switch errno {
		case 0:
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETLEASE, syscall.F_UNLCK)
		case syscall.EAGAIN:
			writing = true
		}
	})
	return writing
}

// FileID names the file st describes (device and inode), so that a file
// replaced by another of the same size and time is seen as changed.
func FileID(st fs.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", s.Dev, s.Ino)
	}
	return ""
}

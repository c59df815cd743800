// Command pause is the sandbox container of the e2e node: every Pod's
// network namespace is held by one process of this image.
//
// As PID 1 of its namespace it has two jobs: stay alive until the kubelet
// stops the sandbox (SIGTERM or SIGINT), and reap the zombies that get
// reparented to it (when the Pod shares its process namespace). The kernel
// delivers to PID 1 only the signals it has handlers for, so SIGTERM and
// SIGINT are caught explicitly, and SIGCHLD drives the reaping.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (handoff e2e)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1, zombies of others will not be reaped here")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down on %v\n", s)
		return
	}
}

// reap collects every child that has exited, without blocking: one SIGCHLD
// may stand for several exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// Package demo is what `pitstop dev` shows on its local cluster once
// pitstop runs: a rolling reboot of the workers under the sample profile
// (Rolling), and the Machine API replacing a machine whose node stopped
// its heartbeat (Machines).
package demo

// Package logging builds pitstop's structured logger: JSON lines by default,
// one logr.Logger shared by pitstop, controller-runtime and client-go's klog.
// It owns the mapping from the --log-level and --log-format flags to zap and
// nothing else.
package logging

import (
	"fmt"
	"io"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Formats are the accepted --log-format values.
var Formats = []string{"json", "text"}

// ParseLevel turns a --log-level value into a zap level: "error", "info",
// "debug" (logr's V(1)), or a verbosity number N that shows V(0) to V(N).
func ParseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "error":
		return zapcore.ErrorLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 10 {
		return 0, fmt.Errorf("must be error, info, debug or a verbosity from 0 to 10")
	}
	// logr's V(n) is zap level -n.
	return zapcore.Level(-n), nil
}

// ValidateFormat checks a --log-format value.
func ValidateFormat(s string) error {
	for _, f := range Formats {
		if s == f {
			return nil
		}
	}
	return fmt.Errorf("must be json or text")
}

// New returns a logger writing to w at level in format, and makes klog (and
// so client-go) write through it. level and format must have been validated.
func New(w io.Writer, level, format string) (logr.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return logr.Discard(), err
	}
	if err := ValidateFormat(format); err != nil {
		return logr.Discard(), err
	}
	opts := []zap.Opts{zap.WriteTo(w), zap.Level(lvl), zap.StacktraceLevel(zapcore.PanicLevel)}
	if format == "text" {
		opts = append(opts, zap.ConsoleEncoder())
	} else {
		opts = append(opts, zap.JSONEncoder(func(c *zapcore.EncoderConfig) {
			c.EncodeTime = zapcore.RFC3339NanoTimeEncoder
			c.TimeKey = "ts"
		}))
	}
	logger := zap.New(opts...)
	klog.SetLogger(logger)
	return logger, nil
}

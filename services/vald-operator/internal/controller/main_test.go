package controller

import (
	"os"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// env is the real kube-apiserver and etcd every test in this package runs against.
var env *testenv.Env

// TestMain starts the control plane once. Controller logs go to stderr at error level;
// VALD_TEST_LOG=debug shows every pass.
func TestMain(m *testing.M) {
	level := zapcore.ErrorLevel
	if os.Getenv("VALD_TEST_LOG") == "debug" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	testenv.Main(m, &env, valdv1.AddToScheme)
}

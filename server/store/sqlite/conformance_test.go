package sqlite_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/server/store/sqlite/sqlitetest"
	"github.com/happy-dev/happy/server/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) { storetest.Run(t, sqlitetest.Backend()) }

func TestConcurrency(t *testing.T) { storetest.RunConcurrency(t, sqlitetest.Backend()) }

func TestCopy(t *testing.T) { storetest.RunCopy(t, sqlitetest.Backend(), sqlitetest.Backend()) }

// BenchmarkIngest: go test -run '^$' -bench Ingest ./server/store/sqlite
func BenchmarkIngest(b *testing.B) { storetest.BenchmarkIngest(b, sqlitetest.Backend()) }

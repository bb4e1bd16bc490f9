package relay

import (
	"os"
	"testing"

	"github.com/happy-dev/happy/server/servertest"
)

// envConformance names an external relay to run the client suite against
// (any implementation of the relay contract, e.g. the reference server).
const envConformance = "HAPPY_CONFORMANCE_SERVER_URL"

// clientSuite is the relay client's behaviour against a relay at url. Each
// case creates its own account, so cases can share one relay.
var clientSuite = []struct {
	name string
	fn   func(t *testing.T, url string)
}{
	{"SessionSendsEveryVersionInOrder", testSessionSendsEveryVersionInOrder},
	{"VersionsSurviveReopen", testVersionsSurviveReopen},
	{"ReceiveSkipsOwnAndDeliversOthersInOrder", testReceiveSkipsOwnAndDeliversOthersInOrder},
	{"ReceiveFromNow", testReceiveFromNow},
	{"DecryptFailuresAreDeliveredAndCounted", testDecryptFailuresAreDeliveredAndCounted},
	{"LiveGapsDuplicatesAndDisorder", testLiveGapsDuplicatesAndDisorder},
	{"MetadataCompareAndSetAcrossDevices", testMetadataCompareAndSetAcrossDevices},
	{"AgentStateNullAndUpdateEvents", testAgentStateNullAndUpdateEvents},
	{"RPCRoundTrip", testRPCRoundTrip},
	{"NetworkCutLosesNothing", testNetworkCutLosesNothing},
	{"KilledClientResumes", testKilledClientResumes},
	{"RefusedTokenFailsOpen", testRefusedTokenFailsOpen},
	{"MachineStateAndRPC", testMachineStateAndRPC},
}

// TestClient runs the suite against a fresh in-process happy server per case.
func TestClient(t *testing.T) {
	for _, tc := range clientSuite {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, servertest.Start(t).URL) })
	}
}

// TestConformance runs the same suite against the external relay named by
// HAPPY_CONFORMANCE_SERVER_URL; it is skipped when that is not set.
func TestConformance(t *testing.T) {
	url := os.Getenv(envConformance)
	if url == "" {
		t.Skip(envConformance + " not set")
	}
	for _, tc := range clientSuite {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, url) })
	}
}

package pay

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestInFlightLogRotatesKeepingWhatIsInFlight: past its size the log is
// rewritten with only the admissions still in flight, and appending goes
// on in the rewritten file.
func TestInFlightLogRotatesKeepingWhatIsInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), inflightName)
	g := inflightLog{path: path, live: map[string][]byte{}}
	if err := g.add("keep", []byte(`{"kept":true}`)); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 200)
	for i := 0; g.size < inflightRotate/2 || i < 30000; i++ {
		id := fmt.Sprint("e", i)
		if err := g.add(id, body); err != nil {
			t.Fatal(err)
		}
		if err := g.remove(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.add("late", []byte(`{"late":true}`)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > inflightRotate || !bytes.Contains(data, []byte("+keep {\"kept\":true}\n")) || !bytes.HasSuffix(data, []byte("+late {\"late\":true}\n")) {
		t.Fatalf("after rotation the log is %d bytes, want under %d holding keep and then late:\n%.300s", len(data), inflightRotate, data)
	}
}

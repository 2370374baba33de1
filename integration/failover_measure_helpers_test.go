package integration

import (
	"testing"
	"time"
)

// TestFailoverMeasures checks the failover test's counting helpers on
// hand-made timelines, since its bound and verdicts rest on them.
func TestFailoverMeasures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(from, to, n int) localSpan { return localSpan{from: at(from), to: at(to), n: n} }

	t.Run("coverSeconds", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			spans []localSpan
			want  int
		}{
			{"none", nil, 0},
			{"one short span", []localSpan{span(0, 250, 5)}, 1},
			{"contiguous spans over 2.1 s", []localSpan{span(0, 1000, 1), span(1000, 2000, 1), span(2000, 2100, 1)}, 3},
			{"two spans far apart", []localSpan{span(0, 250, 1), span(5000, 5250, 1)}, 2},
			{"unsorted, second inside the first second", []localSpan{span(500, 750, 1), span(0, 250, 1)}, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if got := coverSeconds(tc.spans); got != tc.want {
					t.Errorf("coverSeconds = %d, want %d", got, tc.want)
				}
			})
		}
	})

	t.Run("windowCounts", func(t *testing.T) {
		ts := []time.Time{at(0), at(500), at(999), at(1000), at(1500)}
		if got, want := maxWindow(windowCounts(ts, time.Second)).n, 3; got != want {
			t.Errorf("max in 1 s = %d, want %d ([0, 1 s) holds 0, 500 and 999 ms)", got, want)
		}
	})

	t.Run("withLocal", func(t *testing.T) {
		redisTimes := []time.Time{at(0), at(100), at(3000)}
		spans := []localSpan{span(200, 450, 7), span(2900, 3100, 2)}
		if got, want := maxWindow(withLocal(redisTimes, spans, time.Second)).n, 9; got != want {
			t.Errorf("max Redis + in process in 1 s = %d, want %d (2 on Redis + 7 in process)", got, want)
		}
		if got, want := maxWindow(withLocal(redisTimes, spans, time.Minute)).n, 12; got != want {
			t.Errorf("max in 1 min = %d, want %d (everything)", got, want)
		}
	})
}

package metrics

import "testing"

// TestRedisPersistenceGauge: payserver_redis_persistence is the value read
// (0 or 1), and absent while the settings are unknown.
func TestRedisPersistenceGauge(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value float64
		ok    bool
	}{{"keeps nothing", 0, true}, {"keeps its data", 1, true}, {"unknown", 0, false}} {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.WatchRedisPersistence(func() (float64, bool) { return tt.value, tt.ok })
			mfs, err := m.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, mf := range mfs {
				if mf.GetName() == "payserver_redis_persistence" {
					for _, m := range mf.GetMetric() {
						got = append(got, m.GetGauge().GetValue())
					}
				}
			}
			switch {
			case !tt.ok && len(got) != 0:
				t.Errorf("got %v while unknown, want no series", got)
			case tt.ok && (len(got) != 1 || got[0] != tt.value):
				t.Errorf("got %v, want %v", got, tt.value)
			}
		})
	}
}

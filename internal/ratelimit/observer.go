package ratelimit

import "time"

// MultiObserver returns an Observer that passes every event to each of obs,
// in order. Nil entries are skipped; with none left it returns an Observer
// that does nothing. Each observer must itself be non-blocking, as Observer
// requires.
func MultiObserver(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nopObserver{}
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Decided(d Decision, elapsed time.Duration) {
	for _, o := range m {
		o.Decided(d, elapsed)
	}
}

func (m multiObserver) Released(k Key) {
	for _, o := range m {
		o.Released(k)
	}
}

func (m multiObserver) StoreFailed(k Key, err error) {
	for _, o := range m {
		o.StoreFailed(k, err)
	}
}

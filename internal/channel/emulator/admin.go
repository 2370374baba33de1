package emulator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"payserver/internal/netaddr"
)

// maxAdminBody bounds an admin request's body.
const maxAdminBody = 64 << 10

// serveAdmin is GET and POST /admin/channels/{code}: a channel's behaviour,
// and changes to it (a JSON object of Patch fields). Loopback clients only,
// unsigned.
func (e *Emulator) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if !netaddr.IsLoopback(r.RemoteAddr) {
		writeError(w, http.StatusForbidden, codeForbidden, "the admin endpoint serves loopback clients only")
		return
	}
	code := r.PathValue("code")
	ch, ok := e.channels[code]
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "no channel "+code+" here")
		return
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, "reading the body: "+err.Error())
			return
		}
		p, err := ParsePatch(body)
		if err == nil {
			err = ch.apply(p, time.Now())
		}
		if err != nil {
			out := newError(codeInvalidBehaviour, err.Error())
			if fe := (*FieldError)(nil); errors.As(err, &fe) {
				out.Error.Field = fe.Field
			}
			writeJSON(w, http.StatusBadRequest, out)
			return
		}
		e.log.Info("behaviour changed", "channel", code, "change", string(body))
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "use GET or POST")
		return
	}
	writeJSON(w, http.StatusOK, ch.behaviour.Load().view(ch.pause.left(time.Now())))
}

// serveLedger is GET /ledger?since=US: the lines received at or after
// since (Unix microseconds; all when absent) as JSON lines, in receive
// order. Loopback clients only, unsigned.
func (e *Emulator) serveLedger(w http.ResponseWriter, r *http.Request) {
	if !netaddr.IsLoopback(r.RemoteAddr) {
		writeError(w, http.StatusForbidden, codeForbidden, "the ledger serves loopback clients only")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "use GET")
		return
	}
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		var err error
		if since, err = strconv.ParseInt(s, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, "since: want Unix microseconds, got "+strconv.Quote(s))
			return
		}
	}
	wrote := false
	enc := json.NewEncoder(w)
	err := e.store.Lines(r.Context(), since, func(l Line) error {
		if !wrote {
			w.Header().Set("Content-Type", "application/x-ndjson")
			wrote = true
		}
		return enc.Encode(l)
	})
	switch {
	case err != nil && !wrote:
		e.log.Error("ledger not read", "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "the ledger could not be read")
	case err != nil:
		e.log.Warn("ledger answer cut short", "err", err)
	case !wrote:
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
}

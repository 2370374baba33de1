package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Browser sessions of the admin routes. A browser cannot add the bearer
// header, so with PAYSERVER_ADMIN_TOKEN set ops log in once on a form
// (POST, the token in the body, never in a URL) and get a session cookie:
// an opaque random id, kept here with its expiry and its CSRF token, never
// the admin token itself. Sessions live in this process only: a restart
// logs everyone out, and behind a load balancer a browser must keep to one
// instance.
const (
	// AdminSessionTTL is how long a session lasts from its login; it is not
	// extended by use.
	AdminSessionTTL = 12 * time.Hour
	// maxAdminSessions bounds the sessions kept; logging in past it drops
	// the one that expires first.
	maxAdminSessions = 256
	// adminSessionCookie names the session cookie.
	adminSessionCookie = "payserver_admin"
	// CSRFHeader carries the session's CSRF token on a cookie-authenticated
	// request that changes state; a form sends it as the field csrfField.
	CSRFHeader = "X-CSRF-Token"
	csrfField  = "csrf"
	// sessionKey is the gin context key of the request's *adminSession.
	sessionKey = "payserver.adminSession"
)

// adminSession is one logged-in browser.
type adminSession struct {
	expires time.Time
	// csrf must come back with every state-changing request of the
	// session (CSRFHeader or the form field csrfField).
	csrf string
}

// adminSessions is the process's sessions, keyed by the SHA-256 of their
// ids, so that a lookup's timing says nothing about a stored id.
type adminSessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[[sha256.Size]byte]*adminSession
}

func newAdminSessions(now func() time.Time) *adminSessions {
	return &adminSessions{now: now, m: map[[sha256.Size]byte]*adminSession{}}
}

// create starts a session and returns its id (the cookie's value).
func (s *adminSessions) create() (string, *adminSession, error) {
	id, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	now := s.now()
	sess := &adminSession{expires: now.Add(AdminSessionTTL), csrf: csrf}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxAdminSessions {
		var first [sha256.Size]byte
		var firstAt time.Time
		for k, v := range s.m {
			if !v.expires.After(now) {
				delete(s.m, k)
			} else if firstAt.IsZero() || v.expires.Before(firstAt) {
				first, firstAt = k, v.expires
			}
		}
		if len(s.m) >= maxAdminSessions {
			delete(s.m, first)
		}
	}
	s.m[sha256.Sum256([]byte(id))] = sess
	return id, sess, nil
}

// get returns the live session of id, or nil (unknown or expired; an
// expired one is dropped).
func (s *adminSessions) get(id string) *adminSession {
	if id == "" {
		return nil
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[k]
	if sess != nil && !sess.expires.After(s.now()) {
		delete(s.m, k)
		return nil
	}
	return sess
}

// end drops the session of id, if any.
func (s *adminSessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(id)))
}

// randomToken returns 32 random bytes, base64url without padding.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// equalSecret compares two secrets in constant time. Their SHA-256
// digests are compared, as subtle.ConstantTimeCompare returns at once when
// the lengths differ, which would tell a secret's length.
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// changesState reports whether a request of this method may change state:
// everything but GET, HEAD and OPTIONS.
func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// CrossSiteProblem says why r does not come from a page of this server,
// or "" when it does or cannot tell (a client that is not a browser sends
// neither header, and carries no cookie it was not given). A browser's
// Sec-Fetch-Site must be same-origin; without it, the Origin's host must
// be the request's.
func CrossSiteProblem(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site != "same-origin" {
			return "Sec-Fetch-Site is " + site + ", not same-origin"
		}
		return ""
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host {
		return "Origin " + origin + " is not this server"
	}
	return ""
}

// secureRequest reports whether the browser reached the server over TLS:
// directly, or through a proxy that says so (X-Forwarded-Proto: https).
// Trusting the header can only add the cookie's Secure attribute, which
// binds no one but the client that sent it.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// sessionCookie is the cookie that carries a session id; an empty id with
// maxAge -1 deletes it.
func sessionCookie(r *http.Request, id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: adminSessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)}
}

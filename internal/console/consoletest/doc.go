// Package consoletest serves the console through httpapi for the tests of
// both packages: fakes of the console's sources (reports, usage, limits),
// a test server of the whole handler that checks every answer against
// api/openapi.yaml, a server behind the admin login, and a what-if
// service over three decisions.
package consoletest

module github.com/payserver/payserver/api/client

go 1.22

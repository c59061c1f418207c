package main
import (
 _ "cel.dev/cel-go/cel"
 _ "github.com/go-json-experiment/json"
 _ "github.com/santhosh-tekuri/jsonschema/v6"
 _ "github.com/goccy/go-yaml"
 _ "github.com/spf13/cobra"
 _ "github.com/mattn/go-sqlite3"
 _ "github.com/labstack/echo/v4"
 _ "github.com/slack-go/slack"
 _ "github.com/jackc/pgx/v5"
 _ "pgregory.net/rapid"
 _ "github.com/prometheus/client_golang/prometheus"
)
func main(){}

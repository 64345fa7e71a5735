#ifndef CCURLSHIM_H
#define CCURLSHIM_H
#include <curl/curl.h>
/* Typed wrappers for libcurl's variadic setopt/getinfo, which Swift cannot call. */
typedef size_t (*ccurl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*ccurl_xferinfo_cb)(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
CURLcode ccurl_setopt_long(CURL *h, CURLoption o, long v);
CURLcode ccurl_setopt_off(CURL *h, CURLoption o, curl_off_t v);
CURLcode ccurl_setopt_str(CURL *h, CURLoption o, const char *v);
CURLcode ccurl_setopt_ptr(CURL *h, CURLoption o, void *v);
CURLcode ccurl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v);
CURLcode ccurl_setopt_data_cb(CURL *h, CURLoption o, ccurl_data_cb cb);
CURLcode ccurl_setopt_xferinfo_cb(CURL *h, ccurl_xferinfo_cb cb);
CURLcode ccurl_getinfo_long(CURL *h, CURLINFO i, long *o);
CURLcode ccurl_getinfo_socket(CURL *h, curl_socket_t *o);
CURLcode ccurl_getinfo_ptr(CURL *h, CURLINFO i, void **o);
typedef int (*ccurl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *clientp, void *socketp);
typedef int (*ccurl_timer_cb)(CURLM *multi, long timeout_ms, void *clientp);
CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v);
CURLMcode ccurl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v);
CURLMcode ccurl_multi_setopt_socket_cb(CURLM *m, ccurl_socket_cb cb);
CURLMcode ccurl_multi_setopt_timer_cb(CURLM *m, ccurl_timer_cb cb);
#endif
